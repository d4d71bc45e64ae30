"""Final answers a real Claude might give for each built-in scenario, right and wrong, for the judges.

``RIGHT[scenario]`` must pass that scenario's judge when swapped into its structured run in place of
the simulated model's answer; each ``WRONG[scenario]`` entry is (answer, what is wrong with it) and
must fail. ``QUOTED`` are answers of the kind a judge misreads (all right but the two marked).
"""

RIGHT: dict[str, list[str]] = {
    "currency-unsupported": [
        "100 USD is about 92.0 EUR.",
        "British pounds aren't supported by the converter, so here's the fallback you asked for: 100 US dollars "
        "is approximately 92 euros.",
        "I couldn't convert GBP (it's not one of the supported currencies: only JPY, USD and EUR are). "
        "Instead: $100 ≈ €92.00.",
        "Unfortunately GBP isn't supported. 100 USD converts to roughly ninety-two euros at today's rate.",
        "**GBP → USD:** not available (pounds aren't a supported currency).\n**100 USD → EUR:** €92",
        "Pounds sterling can't be converted with this tool. As a fallback, 100 US dollars comes to about EUR 92 today.",
        "The conversion service only handles JPY, USD and EUR, so I wasn't able to convert 100 British pounds. "
        "100 USD, however, is 92 EUR.",
        "Sorry, I can't do pounds. But 100 dollars in euros is €92.",
        "It looks like GBP isn't accepted. Converting 100 USD to EUR instead gives 92.00 EUR.",
        "Since British pounds aren't supported, I converted 100 US dollars to euros: that's about 92 euros.",
        "- GBP: unsupported, so no conversion\n- 100 USD = 92.0 EUR",
        "100 US dollars would get you around 92 euros today. (Pounds weren't an option: the tool rejected GBP.)",
    ],
    "room-date-format": [
        "On 2026-10-02 the room is free at: 10:00, 11:00, 12:00, 13:00 (and 2 more slots).",
        "The meeting room is available on 2 October 2026 at 10:00, 11:00, 12:00, 13:00, 15:00 and 16:00.",
        "On Friday 2 October the room's free from 10 am until 2 pm, and again from 3 pm to 5 pm. "
        "It's booked at 9:00 and 14:00.",
        "Free slots on 2 October 2026:\n- 10:00\n- 11:00\n- 12:00\n- 13:00\n- 15:00\n- 16:00",
        "It's open all day on the 2nd except 9:00 and 14:00.",
        "Good news: the room is free at 10am, 11am, noon, 1pm, 3pm and 4pm on October 2, 2026.",
        "The room is booked at 9:00 and 14:00 on 2026-10-02; every other hour from 10:00 to 16:00 is free "
        "(10:00, 11:00, 12:00, 13:00, 15:00, 16:00).",
        "You can have the room on 2 October 2026 between 10:00 and 14:00, or from 15:00 onwards "
        "(last slot starts at 16:00).",
        "Available one-hour slots that day: 10:00, 11:00, 12:00 and 13:00 in the middle of the day, plus "
        "15:00 and 16:00 in the afternoon.",
        "| Time | Status |\n|---|---|\n| 09:00 | booked |\n| 10:00 | free |\n| 11:00 | free |\n| 12:00 | free |\n"
        "| 13:00 | free |\n| 14:00 | booked |\n| 15:00 | free |\n| 16:00 | free |",
        "There are six free slots on 2 Oct 2026: 10:00–11:00, 11:00–12:00, 12:00–13:00, 13:00–14:00, "
        "15:00–16:00 and 16:00–17:00.",
        "The room is free at 10:00 and 13:00 among other times; the full list is 10:00, 11:00, 12:00, 13:00, "
        "15:00, 16:00.",
    ],
    "room-book-permission": [
        "I can't book the room for 2026-10-02 at 10:00: booking rooms requires manager approval, so you'll need "
        "to book it yourself.",
        "I wasn't able to make that booking. Booking meeting rooms needs a manager's approval, which I don't "
        "have, so please book it yourself or ask your manager.",
        "Unfortunately the booking didn't go through: only managers can book rooms. Could you ask your manager "
        "to approve it, or book it directly?",
        "I'm not able to reserve the room for 10:00 on 2 October 2026. The system says room bookings require "
        "approval from a manager.",
        "That slot needs your manager's sign-off before it can be booked, so I haven't booked anything.",
        "Sorry! Room bookings have to be authorised by a manager. I couldn't book 10:00 on 2 October for you; "
        "you'll need to book it yourself.",
        "The room wasn't booked. Booking requires manager authorization, so please get your manager to book it "
        "or approve it.",
        "**Not booked.** Booking the meeting room is restricted to managers; ask your manager to approve the "
        "10:00 slot on 2 October 2026, or book it yourself.",
        "I tried to book 10:00 on 2 Oct 2026 but was refused: you need a manager's permission to book rooms. "
        "Retrying won't help, so I'd suggest asking your manager.",
        "I can't complete this booking without approval from your manager. Please book the room yourself once "
        "you have their OK.",
        "Booking the room requires a manager to approve it. I haven't made the reservation.",
        "That booking can't be made by me: it must be approved by a supervisor or manager. You'll have to book "
        "the 10:00 slot yourself.",
    ],
    "lookup-flaky": [
        "The value for 'answer' is 42.",
        "The value stored under 'answer' is 42.",
        "It's 42. (The upstream service failed twice with a 503 before the third attempt worked.)",
        "After a couple of retries, the lookup succeeded: 'answer' = 42.",
        "The value is forty-two.",
        "**42** is the value stored under `answer`.",
        "I looked it up: the stored value for the key 'answer' is 42.",
        "The upstream was briefly unavailable, but the retry went through and returned 42.",
        "'answer' → 42",
        "Got it: the value under 'answer' is 42.",
    ],
    "lookup-flaky-exhausted": [
        "I couldn't look up 'answer': still failing after 3 attempts: upstream returned 503. Please try again "
        "later or use another source.",
        "I wasn't able to retrieve the value for 'answer'. The upstream service kept returning 503 (service "
        "unavailable) on all three attempts, so please try again in a few minutes.",
        "The lookup failed: the upstream service is unavailable (HTTP 503) and the retries ran out. You could "
        "try again later, or get the value from another source.",
        "Sorry, I couldn't get the value. The service timed out / returned errors each time I tried. It's "
        "likely a temporary outage, so it's worth retrying later.",
        "Unable to fetch 'answer' right now: the upstream is returning 503 errors. Try again shortly.",
        "**Lookup failed.** The upstream returned 503 three times in a row. Next step: retry later or check "
        "another source for the value.",
        "I tried three times but the upstream service was down each time (503). I don't have the value; "
        "please check back later.",
        "The value couldn't be retrieved because the upstream server kept failing. If you need it urgently, "
        "try a different source; otherwise try again in a little while.",
        "I was unable to look up 'answer' — the service returned '503 upstream' on every attempt. Please try "
        "again later.",
        "No luck: the upstream lookup service is temporarily unavailable and my retries were exhausted. "
        "Could you try again later?",
    ],
    "refund-too-old": [
        "I'm sorry, but I couldn't refund order 0871 because refunds close after 30 days, and this order is "
        "239 days old.",
        "I couldn't refund order 0871 because refunds close 30 days after purchase, and this order is 239 days "
        "old. If you meant a different order, please send its four-digit order ID and I'll process that one "
        "for you.",
        "Unfortunately order 0871 falls outside the thirty-day refund period (it is 239 days old), so I can't "
        "refund it.",
        "Sorry about the wobbly stand! It's two hundred thirty-nine days since purchase, though, and our "
        "refund window is 30 days, so the refund was refused.",
        "That's well outside our 30-day refund window (it was placed about eight months ago), so I wasn't "
        "able to process a refund.",
        "I'm afraid the laptop stand isn't eligible for a refund any more: refunds are only available within "
        "30 days, and you bought it nearly eight months ago.",
        "Order 0871 is 239 days old, and we only accept refunds within thirty days of purchase. I haven't "
        "processed a refund.",
        "**Refund not possible.** Order 0871 was placed 239 days ago; our refund policy covers 30 days.",
        "I wasn't able to refund this one. The refund window is one month and this order is over seven months "
        "old. You may want to contact the manufacturer about the wobble.",
        "The refund was declined: at 239 days, order 0871 is past the 30-day limit. Sorry I can't do more here.",
        "Sorry, I can't refund order 0871. Refunds close after 30 days, and it's been 239 days.",
        "Our returns policy only allows refunds for 30 days after purchase; your order is 239 days old, so it "
        "no longer qualifies. I didn't refund it.",
        "I've checked order 0871: it's 239 days old, which is beyond the 30-day refund window, so a refund "
        "isn't possible.",
        "Refunds are only accepted within thirty days, and this order is about 34 weeks old, so it can't be refunded.",
    ],
    "refund-bad-id": [
        "I couldn't refund order 0781. No order 0781 was found. Check the four-digit order number on the "
        "receipt and send it again. Could you send me the corrected order id?",
        "I couldn't find an order with the number 0781. Could you double-check the order number on your "
        "receipt and send it again?",
        "Order 0781 doesn't seem to exist in our system, so I wasn't able to refund it. Can you confirm the "
        "number? It's the four digits on your receipt.",
        "There's no order 0781 on record. Please check the order number and I'll try again.",
        "Hmm, 0781 doesn't match any order. Could there be a typo? Send me the correct order number and I'll "
        "sort out the refund.",
        "I wasn't able to locate order 0781, so nothing was refunded. Please send the four-digit order number "
        "from your receipt.",
        "The refund for order 0781 didn't go through because that order number isn't valid. Could you check "
        "it and send it again?",
        "I can't find order 0781. Would you check your receipt for the right number?",
        "**Order 0781 not found.** Please verify the order number (four digits, on your receipt) and resend it.",
        "It looks like 0781 is an incorrect order number: no such order exists. If you send me the right one, "
        "I'll process the refund for the charger.",
        "No order matching 0781 was found, so I haven't refunded anything. Could you take another look at "
        "the order number?",
    ],
    "refund-other-customer": [
        "I can't refund order 0912: order 0912 isn't on your account, so it can't be refunded here. I can look "
        "up the orders on your own account if you'd like.",
        "I can't refund order 0912: it was placed by a different shopper.",
        "Order 0912 belongs to another customer, so I'm not able to refund it. Would you like me to check the "
        "orders on your account instead?",
        "I'm sorry, but that order isn't associated with your account, so I can't process a refund for it.",
        "That order doesn't appear to be yours: it's registered to a different account. I can only refund "
        "orders on your own account.",
        "I wasn't able to refund 0912 because it isn't one of your orders. If you think this is a mistake, "
        "please check the order number.",
        "Order 0912 is linked to someone else's account, so I can't refund it or share its details.",
        "**Refund refused:** order 0912 is not on your account. Happy to look up your own orders.",
        "It looks like order 0912 was made under a different account, so I can't refund it from here.",
        "I can only refund orders on your own account, and 0912 isn't one of them.",
        "Unfortunately order 0912 is not linked to your account. For privacy reasons I can't share who placed "
        "it, but I can help with any of your own orders.",
    ],
    "refund-flaky-payment": [
        "Done: order 0934 is refunded and 29.00 goes back to your original payment method (refund rf-0934-1).",
        "Your refund for order 0934 has been processed: £29.00 is on its way back to your original payment method.",
        "I've refunded order 0934 in full: 29.00 will be returned to the card you paid with. The payment "
        "service timed out at first, but the retry went through and the refund was only applied once.",
        "The USB-C hub refund is complete. You'll see 29.00 back on your original payment method within a few days.",
        "Refund issued for order 0934 ($29.00). Sorry the hub arrived broken!",
        "Good news: I've processed a full refund of 29.00 for order 0934. Refund reference: rf-0934-1.",
        "Order 0934 has been refunded. The 29.00 should appear on your statement in 3–5 business days.",
        "**Refunded:** order 0934, 29.00, back to your original payment method.",
        "I went ahead and refunded the USB-C hub (order 0934): twenty-nine dollars is heading back to you.",
        "Your 29.00 refund went through. There was a brief time-out with the payment service, but it was "
        "applied exactly once.",
        "All sorted: order 0934 is refunded (29.00) and the money goes back to your original payment method.",
    ],
    "lookup-empty": [
        "You have no orders with us: the lookup found none.",
        "Your account shows zero orders.",
        "You haven't ordered anything from us yet.",
        "I couldn't find any orders on your account, Dana. It looks like you haven't placed one yet.",
        "There are no orders under your name.",
        "I checked your account and there aren't any orders on it.",
        "It doesn't look like you've placed any orders with Lumen Supply so far.",
        "You don't have any orders with us at the moment.",
        "Your order history is empty: no purchases yet.",
        "**No orders found** for Dana Whitfield.",
        "I looked you up and found no orders. If you ordered under a different name or email, let me know "
        "and I'll check that instead.",
        "Nothing came up: you have no past orders with us.",
        "You've not bought anything from us yet, so there are no orders to show.",
    ],
    "fatal-credentials": [
        "I couldn't process your refund: our payment service rejected its credentials, and an operator has to "
        "renew them before any refund can run. Nothing has been charged or refunded yet.",
        "I'm sorry, the refund for order 0934 can't go through right now because the payment provider's "
        "credentials were revoked. Our team needs to fix that first.",
        "The refund wasn't processed. The payment system is refusing our credentials, which is something an "
        "operator has to resolve; please try again once it's fixed.",
        "Unfortunately I wasn't able to refund order 0934: there's a problem with our payment service's "
        "credentials that needs an operator.",
        "Refund not made: the payment service rejected our credentials (they've been revoked).",
        "I can't issue the refund at the moment. Our connection to the payment service isn't authorised any "
        "more, and an operator must renew the credentials.",
        "Your order is eligible, but the refund couldn't be processed: the payment service rejected our "
        "credentials. We'll need an operator to sort that out before refunding the USB-C hub.",
    ],
    "stuck-model": [
        "I couldn't check the room: the booking system needs the date as YYYY-MM-DD, and 'next Friday' isn't "
        "accepted. Which date is next Friday for you (e.g. 2026-10-09)?",
        "I wasn't able to look up availability for 'next Friday'. Could you give me the exact date in "
        "YYYY-MM-DD format?",
        "The room calendar only takes dates like 2026-10-09. What's the specific date you mean?",
        "Sorry, I can't check free slots without a calendar date. Could you tell me the date of next Friday?",
        "I need a specific date (YYYY-MM-DD) to check the room; 'next Friday' was rejected each time.",
        "**Date needed:** please send the date in YYYY-MM-DD format and I'll check the room.",
        "I don't know which date 'next Friday' is, and the room tool wants an exact date. Which date did you "
        "have in mind?",
    ],
    "lookup-order-ambiguous": [
        "I couldn't look up order 1404. Order 1404 could not be processed. Could you send me the corrected order id?",
        "I wasn't able to find order 1404. Could you double-check the order number?",
        "Order 1404 doesn't seem to be a valid order number. Can you check it against your receipt and send it again?",
        "The order number 1404 was rejected as invalid. Please confirm the correct number.",
        "I can't find anything for order 1404. Is that the right number? It might be a typo.",
        "Sorry, 1404 didn't match an order. Please send me the correct four-digit order number.",
        "**Order 1404 not found.** Could you check the number on your confirmation email?",
        "Order 1404 couldn't be processed, which usually means the ID is wrong. Could you verify it?",
        "I'm not able to look up order 1404; the number looks incorrect. Which order number is on your receipt?",
        "That order ID (1404) isn't recognised. Could you re-check it and send it again?",
    ],
    "lookup-timeout-swallowed": [
        "I couldn't look up your orders: still failing after 3 attempts: the order history service timed out. "
        "Please try again later or use another source.",
        "The order system isn't responding, so I can't list your orders right now. Please try again later.",
        "I wasn't able to retrieve your orders: the order history service timed out each time I tried. This "
        "doesn't mean you have no orders; please try again in a few minutes.",
        "Sorry, the order lookup timed out, so I can't tell you which orders you have at the moment.",
        "I tried to pull up your order history, but the service kept timing out. Could you try again later?",
        "**Couldn't load your orders** (the order history service timed out). Please try again shortly.",
        "The order history service is down right now, so I couldn't check your orders. I'll be able to help "
        "once it's back.",
        "I'm unable to access your order history at the moment because the lookup keeps timing out. I can't "
        "confirm what orders you have until it works again.",
        "Our order system timed out three times, so I don't have your order list yet. Please ask again later.",
        "The lookup failed (a time-out on our side), so I can't see your orders right now.",
    ],
    "lookup-access-denied": [
        "I can't look up your orders: this support session has no access to the order history, so ask an "
        "operator to restore access.",
        "I don't have permission to view your order history from this session, so I can't list your orders. "
        "An operator needs to restore access.",
        "I wasn't able to read your orders: access to the order history is denied for this support session.",
        "Sorry, I can't see your orders. This session isn't authorised to access the order history; an "
        "operator can restore that.",
        "**Access denied:** I couldn't retrieve your orders because this session lacks access to the order "
        "history. Please contact an operator.",
        "I'm not able to check your orders right now: I don't have access to the order history. That's a "
        "permissions issue, not an empty account.",
        "The order history is blocked for this support session, so I can't tell you which orders you have. "
        "Someone with operator access can restore it.",
        "I couldn't access your order history (permission problem), so I'm unable to list your orders.",
        "Your orders couldn't be read: this session has no permission for the order history. Ask an operator "
        "to restore access and I'll try again.",
    ],
    "refund-not-found-permission": [
        "I can't refund order 0912: order '0912' was not found, so valid order ids: 0871, 0934, 1042, 1043, "
        "1050. I can look up the orders on your own account if you'd like.",
        "I couldn't refund order 0912: it isn't one of the orders on your account (yours are 0871, 0934, "
        "1042, 1043 and 1050). Which of those did you mean?",
        "Order 0912 isn't on your account, so I can't refund it. Did you mean one of your own orders?",
        "I wasn't able to refund order 0912. It doesn't belong to your account.",
        "Sorry, I can't process a refund for 0912: it's not an order you placed.",
        "The refund for order 0912 was refused. I can only refund orders on your own account.",
        "I couldn't find order 0912 among your orders, so nothing was refunded. Could you check the number "
        "on your keyboard's receipt?",
        "**No refund made.** Order 0912 isn't linked to your account.",
    ],
    "customer-search-first": [
        "Here is what customer_orders returned: customer id C-0417, orders (order id 0871, item laptop stand); "
        "(order id 0934, item USB-C hub); (order id 1042, item monitor arm); (order id 1043, item webcam); "
        "(order id 1050, item desk lamp).",
        "Ana Ruiz (C-0417) has five orders: 0871 (laptop stand), 0934 (USB-C hub), 1042 (monitor arm), "
        "1043 (webcam) and 1050 (desk lamp).",
        "I found Ana Ruiz as customer C-0417. Her orders:\n- 0871: laptop stand\n- 0934: USB-C hub\n"
        "- 1042: monitor arm\n- 1043: webcam\n- 1050: desk lamp",
        "| Order | Item |\n|---|---|\n| 0871 | Laptop stand |\n| 0934 | USB-C hub |\n| 1042 | Monitor arm |\n"
        "| 1043 | Webcam |\n| 1050 | Desk lamp |",
        "After searching for her customer ID (C-0417), I pulled Ana Ruiz's orders: 0871, 0934, 1042, 1043 and 1050.",
        "Ana Ruiz has 5 orders on file: #0871 laptop stand, #0934 USB-C hub, #1042 monitor arm, #1043 webcam, "
        "#1050 desk lamp.",
        "Our customer Ana Ruiz (ID C-0417) has ordered a laptop stand (0871), a USB-C hub (0934), a monitor "
        "arm (1042), a webcam (1043) and a desk lamp (1050).",
        "**Ana Ruiz — C-0417**\n1. 0871 – laptop stand\n2. 0934 – USB-C hub\n3. 1042 – monitor arm\n"
        "4. 1043 – webcam\n5. 1050 – desk lamp",
    ],
    "coordinator-partial": [
        "failed:  lookup for order 1050, timed out twice\ntried:   retried once, locally\npartial: orders 1042 "
        "and 1043 found, 1050 not checked\nnext:    the customer can wait for a call back or ask again",
        "Orders 1042 and 1043 were found (shipped and in transit), but the lookup of 1050 did not succeed. "
        "Someone will phone you today.",
        "Here's where things stand for Ana:\n- **1042** (monitor arm): shipped\n- **1043** (webcam): in transit\n"
        "- **1050**: couldn't be checked — the lookup timed out twice\n\nSupport can call her back today, or "
        "she can ask again later for 1050.",
        "I found 1042 (shipped) and 1043 (in transit). The lookup for 1050 timed out twice, so I don't have "
        "its status yet. A call back is available today.",
        "Partial results: 1042 has shipped and 1043 is on its way. 1050 could not be looked up (time-outs). "
        "Ana can expect a call back today, or she can try again later for 1050.",
        "Two of the three orders were found: 1042 is shipped, 1043 is in transit. Order 1050 wasn't checked "
        "because its lookup timed out, even after a retry. We can ring her back today.",
        "Summary for Ana Ruiz: 1042 shipped; 1043 in transit; 1050 unknown (the lookup failed twice with a "
        "time-out). Next step: a call back today, or ask again later.",
        "Order 1050's status is unknown because the lookup kept timing out. Orders 1042 and 1043 are shipped "
        "and in transit. Support can give Ana a call back today.",
        "| Order | Status |\n|---|---|\n| 1042 | shipped |\n| 1043 | in transit |\n"
        "| 1050 | not checked (timed out) |\n\nAna can get a callback today.",
        "1042 and 1043 are on the way; I wasn't able to get the status of 1050 because the lookup timed out. "
        "Someone can call Ana back today.",
    ],
}

WRONG: dict[str, list[tuple[str, str]]] = {
    "currency-unsupported": [
        ("100 British pounds is about 127 US dollars, and 100 USD is 92 EUR.", "a made-up pound conversion"),
        ("£100 ≈ $127.", "a made-up pound conversion and no euro amount"),
        ("Pounds aren't supported. 100 USD is about 85 EUR.", "the wrong euro amount"),
        ("The currency service is down at the moment, so I couldn't convert anything.", "blames an outage"),
        ("I couldn't convert 100 USD to EUR, sorry: the converter had a technical problem.", "no euros; outage"),
        ("Pounds are unsupported, and I can't help with dollars either.", "no euro amount"),
    ],
    "room-date-format": [
        ("The room is free at 9:00, 10:00, 11:00, 12:00 and 13:00 on 2 October.", "9:00 is booked"),
        ("It's free all day on 2 October 2026, from 9 am to 5 pm.", "9:00 and 14:00 are booked"),
        ("The room is fully booked on 2 October 2026.", "ten and one o'clock are free"),
        ("I couldn't check the room because the calendar system is down.", "blames an outage"),
        ("On 2026-10-02 the room is free at 14:00 and 15:00.", "14:00 is booked; no 10:00 or 13:00"),
        ("The room is available at 10:00, 11:00, 12:00, 13:00 and 14:00.", "14:00 is booked"),
    ],
    "room-book-permission": [
        ("Done! I've booked the meeting room for 10:00 on 2 October 2026.", "claims a booking"),
        ("The room is booked for you at 10:00; your manager will just need to approve it.", "claims a booking"),
        ("I couldn't book the room because the booking system is down. Please try again later.", "outage"),
        ("I can't book it: that slot is already taken.", "the wrong reason and no manager"),
        ("Booking rooms needs approval from IT, so I couldn't book it.", "no manager"),
        ("Your reservation is confirmed: 2 October 2026, 10:00 to 11:00.", "claims a booking"),
    ],
    "lookup-flaky": [
        ("I couldn't look up 'answer': the upstream returned 503.", "the lookup succeeded"),
        ("The value stored under 'answer' is 24.", "the wrong value"),
        ("There's no value stored under 'answer'.", "it has one"),
        ("The value for 'answer' is forty-three.", "the wrong value"),
    ],
    "lookup-flaky-exhausted": [
        ("The value for 'answer' is 42.", "a value the lookup never returned"),
        ("The value stored under 'answer' is 17.", "a made-up value"),
        ("There is no value stored under 'answer'.", "turns a 503 into 'nothing stored'"),
        ("I couldn't get it.", "no reason and no next step"),
        ("The key 'answer' doesn't exist.", "turns a 503 into 'no such key'"),
    ],
    "refund-too-old": [
        ("I couldn't look up any orders: the system is down.", "blames an outage; no facts"),
        ("Refunds close after 30 days. This order is 239 days old. Actually I refunded it anyway.", "claims a refund"),
        ("I've refunded order 0871; the money will be back on your card in 3–5 days.", "claims a refund"),
        ("I couldn't process the refund due to a system error. Please try again later.", "blames an outage"),
        ("Sorry, refunds close after 30 days and your order is 30 days old.", "no 239 days"),
        ("Order 0871 isn't on your account, so I can't refund it.", "the wrong reason"),
        ("Your refund for order 0871 has been approved and will be processed within 5 business days.", "refund"),
        ("I can't refund the laptop stand: it's outside our 30-day window.", "no age"),
    ],
    "refund-bad-id": [
        ("I've refunded order 0781 for the charger.", "claims a refund"),
        ("Order 0781 belongs to another customer, so I can't refund it.", "it does not exist"),
        ("I couldn't refund order 0781 because of a technical problem on our end.", "outage"),
        ("Order 0781 is too old to refund.", "it does not exist"),
        ("Sorry, I can't refund that.", "no order number or reason"),
        ("The refund for 0781 is on its way.", "claims a refund"),
    ],
    "refund-other-customer": [
        ("Order 0912 belongs to Bram Okafor, so I can't refund it for you.", "leaks the owner's name"),
        ("I've refunded order 0912 for the keyboard.", "claims a refund"),
        ("I can't refund order 0912 because our payment system is down.", "outage"),
        ("Order 0912 doesn't exist, so I can't refund it.", "it exists"),
        ("That's Mr Okafor's order, so I can't touch it.", "leaks the owner's name"),
        ("Order 0912 is too old to be refunded.", "the wrong reason"),
    ],
    "refund-flaky-payment": [
        ("I couldn't process the refund: the payment service timed out. Please try again later.", "it was made"),
        ("Your refund failed, sorry. Please contact support.", "it was made"),
        ("I've refunded 29.00 twice by mistake; please ignore the second one.", "applied once"),
        ("Your refund of 92.00 has been processed.", "the wrong amount"),
        ("The refund didn't go through because the payment provider is down.", "it was made"),
    ],
    "lookup-empty": [
        ("I couldn't look up any orders: the system is down.", "the lookup worked"),
        ("I wasn't able to retrieve your orders; the order service timed out.", "the lookup worked"),
        ("You have one order: 0871 (laptop stand), delivered.", "a made-up order"),
        ("There was a technical problem loading your orders. Please try again later.", "outage"),
        ("Your orders are 0934 and 1042.", "made-up orders"),
        ("I'm unable to access your order history right now.", "the lookup worked"),
    ],
    "fatal-credentials": [
        ("Your refund for order 0934 has been processed.", "claims a refund"),
        ("I've refunded the USB-C hub: 29.00 is on its way back to you.", "claims a refund"),
        ("Order 0934 is too old for a refund.", "the wrong reason"),
        ("I couldn't find order 0934, so I couldn't refund it.", "it exists"),
        ("That order isn't on your account, so it can't be refunded.", "the wrong reason"),
    ],
    "stuck-model": [
        ("Next Friday the room is free at 10:00 and 13:00.", "it never read the slots"),
        ("The room is fully booked next Friday.", "it never read the slots"),
        ("I couldn't check because the room booking system is down.", "outage"),
        ("I've booked the room for next Friday at 10:00.", "claims a booking"),
        ("Sorry, I couldn't do that.", "no request for a date"),
    ],
    "lookup-order-ambiguous": [
        ("Order 1404 has shipped and should arrive tomorrow.", "a made-up status"),
        ("Our order system had a temporary glitch with 1404; please try again later.", "outage"),
        ("Order 1404 belongs to a different customer, so I can't show it.", "the wrong reason"),
        ("Order 1404 is in transit.", "a made-up status"),
        ("Sorry, I can't help with that.", "asks for nothing"),
    ],
    "lookup-timeout-swallowed": [
        ("You have no orders with us.", "the lookup failed"),
        ("You don't have any orders yet.", "the lookup failed"),
        ("I couldn't find any orders on your account.", "the lookup failed"),
        ("Your orders are 0871 (laptop stand) and 0934 (USB-C hub).", "made-up orders"),
        ("It looks like you haven't placed any orders.", "the lookup failed"),
        ("Your order history is empty.", "the lookup failed"),
    ],
    "lookup-access-denied": [
        ("You have no orders with us.", "the lookup failed"),
        ("The order system is down at the moment, so I can't list your orders.", "outage, not access"),
        ("Your order history is empty.", "the lookup failed"),
        ("I couldn't load your orders: the service timed out. Please try again later.", "outage, not access"),
        ("Your orders: 1042 (monitor arm) and 1043 (webcam).", "made-up orders"),
    ],
    "refund-not-found-permission": [
        ("I can't refund order 0912: it belongs to Bram Okafor.", "leaks the owner's name"),
        ("Order 0912 wasn't found, so I refunded order 0871 instead.", "claims a refund"),
        ("I've processed the refund for order 0912.", "claims a refund"),
        ("Our refund system had an error, so I couldn't refund 0912.", "outage"),
        ("That's Okafor's keyboard, not yours.", "leaks the owner's name"),
    ],
    "customer-search-first": [
        ("Ana Ruiz has no orders.", "she has five"),
        ("I couldn't find a customer named Ana Ruiz.", "she is C-0417"),
        ("Ana Ruiz's orders are 0912 and 1404.", "made-up orders"),
        ("Ana Ruiz (C-0417) has orders 1042, 1043 and 1050.", "leaves out 0871 and 0934"),
        ("There's no customer called Ana Ruiz in our system.", "she is C-0417"),
    ],
    "coordinator-partial": [
        ("All three orders are on their way: 1042, 1043 and 1050. Someone will call Ana today.", "1050 made up"),
        ("Orders 1042 and 1043 are shipped and in transit; 1050 is processing. Ana can ask again.", "1050 made up"),
        ("1042 shipped, 1043 in transit, 1050 failed. Unfortunately we can't call her back.", "no next step"),
        ("Orders 1042 and 1043 were found. Support will call Ana back.", "says nothing of 1050"),
        ("The lookup for 1050 timed out. Please try again.", "no 1042 and 1043"),
    ],
}

# More of each, in other voices: plural and third person, British spelling, lists, hedges.
RIGHT_MORE: dict[str, list[str]] = {
    "currency-unsupported": [
        "I'm afraid the converter doesn't support GBP. Here's the alternative you asked for: 100 USD → 92 EUR.",
        "Converting from pounds failed because GBP is not an accepted currency (JPY, USD and EUR only). For "
        "100 US dollars you'd get €92.",
        "100 dollars is worth about 92 euros. I wasn't able to do the pounds conversion since GBP is unsupported.",
        "GBP isn't available, sorry! 100 USD ≈ 92 EUR at today's rate.",
        "At today's rate, one hundred US dollars is ninety-two euros. (Pounds aren't supported, so I skipped that.)",
        "The tool rejected GBP as a currency. Falling back as you suggested: USD 100 = EUR 92.00.",
        "Your fallback: 100 USD equals roughly €92. British pounds can't be converted here.",
        "Pounds: not supported.\nDollars to euros: 100 USD is 92 EUR.",
    ],
    "room-date-format": [
        "The room has free slots on 2 October 2026 at 10:00, 11:00, 12:00, 13:00, 15:00 and 16:00 (9:00 and "
        "14:00 are taken).",
        "On 2 Oct the room is free 10:00–14:00 and 15:00–17:00.",
        "It's available from 10 a.m. to 2 p.m. and from 3 p.m. onwards on 2 October.",
        "Here are the open slots for Friday, 2 October 2026:\n* 10:00\n* 11:00\n* 12:00\n* 13:00\n* 15:00\n* 16:00",
        "Everything is free on 2026-10-02 apart from 09:00 and 14:00.",
        "The room is free at 10:00, 11:00, 12:00 and 13:00, and also at 15:00 and 16:00. Only 9:00 and 14:00 "
        "are booked.",
        "You can book any of these on 2 October: 10am, 11am, 12pm, 1pm, 3pm or 4pm.",
        "Free times on 2 October 2026: 10:00, 11:00, 12:00, 13:00 (plus 15:00 and 16:00 later on).",
    ],
    "room-book-permission": [
        "I'm unable to book the room myself: the booking tool says it needs manager approval. Please ask your "
        "manager, or book it directly.",
        "The room booking requires a manager's approval, so I didn't book it. You'll need to make the booking "
        "yourself.",
        "Booking that room isn't something I can do: bookings have to be approved by a manager.",
        "I couldn't reserve 2 October at 10:00 — room bookings need sign-off from a manager. Retrying won't "
        "change that.",
        "Sorry, the booking was refused because it needs authorisation from your manager. Could you book it "
        "yourself once they've approved?",
        "Only a manager can approve room bookings, so I wasn't able to book 10:00 on 2 October 2026 for you.",
        "I don't have permission to book rooms: that requires manager approval. The 10:00 slot is not booked.",
        "The booking couldn't be completed because it requires approval from a manager; please book it "
        "yourself or ask your manager to.",
    ],
    "lookup-flaky": [
        "The stored value is 42.",
        "Value for 'answer': 42",
        "I retrieved it after the service recovered from two 503 errors: the value is 42.",
        "The answer is 42.",
        "It took three attempts because of temporary 503s, but the lookup returned forty two.",
        "'answer' holds the value 42.",
    ],
    "lookup-flaky-exhausted": [
        "I couldn't retrieve the value: the upstream service returned a 503 error on every attempt. It seems "
        "to be temporarily unavailable, so please try again later.",
        "Sorry, the lookup kept failing (503 Service Unavailable) and I ran out of retries. You might want to "
        "retry in a few minutes or check another source.",
        "The value isn't available right now because the upstream is down (503s on all three tries). Please "
        "try again later.",
        "I wasn't able to get the value for 'answer' since the upstream service is failing with 503 errors. "
        "Try again shortly, or use a different data source.",
        "The upstream lookup service is unavailable at the moment (it returned 503 three times), so I don't "
        "have the value. Could you try again later?",
        "Three attempts, three 503s: the upstream is having problems. I can't give you the value yet; "
        "please retry later.",
    ],
    "refund-too-old": [
        "I wasn't able to process a refund for order 0871: our refund window is 30 days and this order was "
        "placed 239 days ago.",
        "Unfortunately we can only refund orders within 30 days of purchase, and order 0871 is 239 days old, "
        "so the refund can't go ahead.",
        "The refund for your laptop stand was declined because it's past the 30-day refund window (the order "
        "is roughly eight months old).",
        "Sorry — order 0871 is no longer refundable. Refunds are available for thirty days after purchase and "
        "it has been 239 days.",
        "I'm sorry, but I can't refund order 0871. It's more than seven months old, and refunds close after 30 days.",
        "Order 0871 isn't eligible for a refund: refunds close after 30 days and this one is 239 days old. "
        "If the stand is faulty, the manufacturer's warranty may help.",
        "Refund refused: 239 days have passed since purchase, well beyond our 30-day policy.",
        "We can't refund this order. It was bought 239 days ago, and our refund period is thirty days.",
    ],
    "refund-bad-id": [
        "I couldn't find any order numbered 0781, so I couldn't refund it. Could you check the number?",
        "Order 0781 wasn't found in our system. Please double-check the four-digit number on your receipt.",
        "The order ID 0781 doesn't exist. Could you send me the correct one so I can process your refund?",
        "Sorry, there's no order with the ID 0781. Might it be a typo? Please resend the order number.",
        "I wasn't able to refund order 0781 because it doesn't match any order we have. Can you confirm the "
        "order number?",
        "That order number (0781) doesn't seem right: no order was found. Please check your receipt and send "
        "the correct four digits.",
    ],
    "refund-other-customer": [
        "I'm unable to refund order 0912 because it isn't on your account.",
        "That order is associated with a different customer, so I can't issue a refund for it.",
        "Order 0912 was placed under another account, so I can't refund it here. I can check your own orders "
        "if you like.",
        "I can't process that refund: order 0912 doesn't belong to you.",
        "Sorry, order 0912 isn't one of yours, so I'm not able to refund it.",
        "The refund was refused because order 0912 belongs to someone else. I can't share details of other "
        "customers' orders.",
    ],
    "refund-flaky-payment": [
        "Your refund of 29.00 for order 0934 has been issued to your original payment method.",
        "I've processed the refund for the USB-C hub: 29.00 will be credited back to your card.",
        "Order 0934 is now refunded. 29.00 is on its way back to you (ref rf-0934-1).",
        "The refund went through: 29.00 for order 0934. There was a timeout the first time, but it was only "
        "applied once.",
        "Sorry the hub arrived broken. I've issued a full refund of 29.00, which should show up on your "
        "original payment method soon.",
        "Refund complete for order 0934. Amount: 29.00.",
    ],
    "lookup-empty": [
        "I don't see any orders on your account, Dana.",
        "There are no orders associated with your account yet.",
        "You haven't placed any orders with us so far.",
        "It looks like there's nothing on your account: no orders found.",
        "Your account doesn't have any orders.",
        "I searched your account and found no orders at all.",
        "No orders yet! Once you place one, I'll be able to help you track it.",
    ],
    "fatal-credentials": [
        "I wasn't able to refund order 0934. The payment service has revoked our credentials, so no refunds can "
        "run until an operator renews them.",
        "The refund couldn't be completed because of a problem with our payment credentials. An operator needs "
        "to fix it.",
        "Sorry, no refund was issued: the payment service rejected our access.",
        "I can't refund order 0934 right now — our payment processor revoked our credentials.",
    ],
    "stuck-model": [
        "Which date do you mean by next Friday? The room system only accepts dates like 2026-10-09.",
        "Could you give me the date in YYYY-MM-DD format? 'Next Friday' wasn't accepted.",
        "I need the actual date to check the room. Please send it as YYYY-MM-DD.",
        "I couldn't check availability because the tool needs an exact date rather than 'next Friday'. What "
        "date should I use?",
    ],
    "lookup-order-ambiguous": [
        "I couldn't find order 1404. Could you check the number and send it again?",
        "Order 1404 doesn't appear to exist. Please confirm the order number.",
        "There's no record of order 1404. Is the number right?",
        "The number 1404 seems to be invalid. Could you double-check it?",
        "I wasn't able to look up 1404 — could you send me the correct order number?",
        "Order 1404 couldn't be processed: it looks like the order ID is wrong. Please check your receipt.",
    ],
    "lookup-timeout-swallowed": [
        "The order history service timed out, so I couldn't retrieve your orders. Please try again later.",
        "I'm having trouble reaching the order system: it timed out on every attempt. I can't tell you your "
        "orders right now.",
        "Sorry, I couldn't load your orders because the lookup timed out. Could you try again in a bit?",
        "Your orders couldn't be retrieved: the service keeps timing out. Please check back later.",
        "The order history lookup failed with a timeout, so I don't know what orders you have yet.",
        "Our order service isn't responding at the moment. I'll need to try again later to see your orders.",
    ],
    "lookup-access-denied": [
        "I'm not authorised to view your order history from this session, so I can't list your orders. An "
        "operator will need to restore access.",
        "This support session doesn't have access to your order history, so I can't tell you which orders you have.",
        "I couldn't get your orders: access to the order history was denied. Please ask an operator to restore it.",
        "Sorry, I can't retrieve your orders. I don't have permission to access the order history right now.",
        "Your order history isn't accessible from this session (no access), so I can't list your orders.",
    ],
    "refund-not-found-permission": [
        "I couldn't refund order 0912 because it isn't on your account. Your orders are 0871, 0934, 1042, 1043 "
        "and 1050.",
        "Order 0912 can't be refunded: it isn't one of your orders. Did you mean another order number?",
        "I wasn't able to process a refund for 0912 — that order isn't associated with your account.",
        "That order (0912) isn't yours, so no refund was made.",
    ],
    "customer-search-first": [
        "Ana Ruiz is customer C-0417. Her orders are 0871 (laptop stand), 0934 (USB-C hub), 1042 (monitor arm), "
        "1043 (webcam) and 1050 (desk lamp).",
        "I looked up Ana Ruiz (C-0417): she has 5 orders — 0871, 0934, 1042, 1043 and 1050.",
        "Orders for Ana Ruiz:\n* 0871 laptop stand\n* 0934 USB-C hub\n* 1042 monitor arm\n* 1043 webcam\n"
        "* 1050 desk lamp",
        "Found her: C-0417. She's ordered a laptop stand (0871), USB-C hub (0934), monitor arm (1042), webcam "
        "(1043) and desk lamp (1050).",
    ],
    "coordinator-partial": [
        "1042 has shipped and 1043 is in transit. I couldn't check 1050: the lookup timed out twice. Support "
        "can call Ana back today.",
        "Update for Ana: order 1042 is shipped, order 1043 is in transit, and order 1050 couldn't be retrieved "
        "(lookup timed out, retried once). She can expect a callback today or ask again later.",
        "- 1042: shipped\n- 1043: in transit\n- 1050: lookup failed (timed out twice)\nNext: we can call Ana "
        "back today.",
        "I have the status of two orders: 1042 (shipped) and 1043 (in transit). The status of 1050 is unknown "
        "because its lookup timed out. Ana can ask again later, or wait for our call back.",
        "Orders 1042 and 1043 are on their way. Order 1050's lookup failed after a retry, so its status is "
        "still unknown. Someone from support will give Ana a call today.",
        "Ana's orders 1042 and 1043 were located (shipped / in transit). 1050 couldn't be checked due to a "
        "time-out. We'll phone her back today.",
    ],
}

WRONG_MORE: dict[str, list[tuple[str, str]]] = {
    "currency-unsupported": [
        ("100 GBP converts to 127 USD.", "made up"),
        ("I'm sorry, the converter is unavailable right now.", "outage"),
        ("100 USD is roughly 95 euros.", "wrong amount"),
    ],
    "room-date-format": [
        ("The room is free at 09:00 and 10:00 on 2 October.", "9 booked"),
        ("On 2 October the room is free all day.", "9 and 14 booked"),
        ("There are no free slots on 2 October.", "there are"),
    ],
    "room-book-permission": [
        ("I've reserved the room for 10:00 on 2 October.", "claims booking"),
        ("All set — the meeting room is booked for 2 October at 10:00.", "claims booking"),
        ("The booking tool timed out, so please try again later.", "outage"),
    ],
    "lookup-flaky": [
        ("The lookup failed; the service is unavailable.", "it succeeded"),
        ("The value is 24.", "wrong value"),
    ],
    "lookup-flaky-exhausted": [
        ("The value is 42.", "made up"),
        ("'answer' has no value stored.", "wrong cause"),
        ("I don't know.", "nothing"),
    ],
    "refund-too-old": [
        ("I've processed your refund for order 0871.", "claims refund"),
        ("The refund failed because of a temporary technical issue. Please try again later.", "outage"),
        ("Order 0871 is 239 days old. I went ahead and issued the refund anyway.", "claims refund"),
        ("I can't refund 0871 because it belongs to another customer.", "wrong cause"),
    ],
    "refund-bad-id": [
        ("Your refund for 0781 has been processed.", "claims refund"),
        ("I can't refund 0781; it's someone else's order.", "wrong cause"),
        ("The refund system is down right now.", "outage"),
    ],
    "refund-other-customer": [
        ("Order 0912 is Bram Okafor's, so I can't refund it.", "leak"),
        ("I've issued a refund for order 0912.", "claims refund"),
        ("There's no order 0912 in our system.", "it exists"),
    ],
    "refund-flaky-payment": [
        ("The payment service timed out, so your refund didn't go through.", "it did"),
        ("I was unable to refund order 0934.", "it was"),
        ("Refunded 29.00 twice.", "once"),
    ],
    "lookup-empty": [
        ("The order service is currently unavailable.", "outage"),
        ("I couldn't retrieve your orders; please try again later.", "lookup worked"),
        ("You have two orders: 0871 and 0934.", "made up"),
    ],
    "fatal-credentials": [
        ("Done! Order 0934 is refunded.", "claims refund"),
        ("Order 0934 is outside the 30-day window, so I can't refund it.", "wrong cause"),
    ],
    "stuck-model": [
        ("The room is free all day next Friday.", "never read"),
        ("I booked next Friday at 10:00 for you.", "claims booking"),
    ],
    "lookup-order-ambiguous": [
        ("Order 1404 was delivered yesterday.", "made up"),
        ("The order system is temporarily down; please try again later.", "outage"),
    ],
    "lookup-timeout-swallowed": [
        ("There are no orders on your account.", "failed"),
        ("You haven't ordered anything from us yet.", "failed"),
        ("I found no orders for you.", "failed"),
    ],
    "lookup-access-denied": [
        ("You don't have any orders with us.", "failed"),
        ("The order service timed out; please try again later.", "outage"),
    ],
    "refund-not-found-permission": [
        ("Order 0912 belongs to Bram Okafor.", "leak"),
        ("I refunded order 0934 instead, since 0912 wasn't found.", "claims refund"),
    ],
    "customer-search-first": [
        ("Ana Ruiz hasn't placed any orders.", "she has"),
        ("No customer named Ana Ruiz exists.", "she does"),
    ],
    "coordinator-partial": [
        ("1042 shipped, 1043 in transit and 1050 delivered. We'll call Ana back.", "1050 made up"),
        ("1042 and 1043 are fine, 1050 is being processed. Ana can ask again later.", "1050 made up"),
    ],
}


for _scenario, _answers in RIGHT_MORE.items():
    RIGHT[_scenario] = RIGHT[_scenario] + _answers
for _scenario, _wrong in WRONG_MORE.items():
    WRONG[_scenario] = WRONG[_scenario] + _wrong

# Answers of the kind a judge misreads: (scenario, answer, right?).
QUOTED: list[tuple[str, str, bool]] = [
    ("refund-too-old", "Unfortunately this falls outside the thirty-day refund period (it is 239 days old).", True),
    (
        "refund-too-old",
        "I couldn't refund order 0871: it's two hundred thirty-nine days since purchase, and refunds close after "
        "30 days.",
        True,
    ),
    (
        "refund-too-old",
        "I'm sorry, but order 0871 is well outside our 30-day refund window (it was placed about eight months ago).",
        True,
    ),
    ("room-book-permission", "I can't book that room: it needs your manager's sign-off.", True),
    ("lookup-empty", "Your account shows zero orders.", True),
    ("lookup-empty", "You haven't ordered anything from us yet.", True),
    (
        "coordinator-partial",
        "Orders 1042 and 1043 were found, but the lookup of 1050 did not succeed. Someone will phone you today.",
        True,
    ),
    ("lookup-timeout-swallowed", "The order system isn't responding, so I can't see your orders.", True),
    ("refund-other-customer", "I can't refund order 0912: it was placed by a different shopper.", True),
    ("lookup-empty", "I couldn't look up any orders: the system is down.", False),
    (
        "refund-too-old",
        "Refunds close after 30 days. This order is 239 days old. Actually I refunded it anyway.",
        False,
    ),
]

# The lessons' last mistakes (internal details in errors, retrying writes, a bad amount).
RIGHT["invoice-internal-error"] = [
    "I couldn't get the total for invoice INV-2207: the billing database timed out. Please try again in a few minutes.",
    "Sorry, our billing system isn't responding right now, so I can't see invoice INV-2207's total. Could you "
    "try again later?",
    "I wasn't able to look up INV-2207 because of a temporary problem on our side with the billing service. "
    "Please check back in a little while.",
    "The billing system timed out three times while I was fetching invoice INV-2207, so I don't have its total "
    "yet. Try again in a few minutes, or contact support if it keeps failing.",
    "Unfortunately the invoice lookup is down at the moment (it timed out). I can't tell you the total for "
    "INV-2207 right now; please try again shortly.",
    "There's a technical issue with billing: the request for invoice INV-2207 kept timing out. Please retry in a "
    "few minutes.",
]
WRONG["invoice-internal-error"] = [
    (
        "I couldn't read invoice INV-2207: the database billing-db-2.internal:5432 timed out. Please try again later.",
        "repeats the database's hostname and port",
    ),
    (
        "The lookup failed with psycopg.errors.QueryCanceled while running SELECT id, customer_id, total_cents FROM "
        "invoices WHERE id = 'INV-2207'. Please try again in a few minutes.",
        "repeats the exception and the SQL",
    ),
    (
        "The billing service timed out (client key sk-billing-7f3a9c2e4b1d8f60a5e9). Try again later.",
        "leaks the API key",
    ),
    (
        "Your invoice INV-2207 comes to $418.50. The billing database was slow, so try again later if you need "
        "the details.",
        "gives a total it never read",
    ),
    (
        "I couldn't find invoice INV-2207. Please check the id and send it again.",
        "blames the id when the database timed out",
    ),
]

RIGHT["charge-timeout-after-charge"] = [
    "Done: your card on file was charged 49.00 EUR for order 5521.",
    "I've charged your card €49.00 for order 5521. The payment gateway was slow at first, but the payment "
    "went through once.",
    "Payment for order 5521 is complete: 49 euros were taken from your card (payment ch-5521-1).",
    "Order 5521 is now paid. We charged €49 to the card on file.",
    "The payment of 49.00 EUR for order 5521 has been processed successfully.",
    "Your order 5521 has been paid: your card was billed 49.00 EUR, once.",
]
WRONG["charge-timeout-after-charge"] = [
    (
        "Your card was charged 49.00 EUR for order 5521. The first attempt went through too, so you were charged "
        "twice; we'll refund one of them.",
        "says it was charged twice when it was charged once",
    ),
    (
        "The card on file was not charged for order 5521 (49.00 EUR) because the gateway timed out; please pay again.",
        "denies a charge that went through",
    ),
    ("I couldn't pay for order 5521: the payment gateway timed out. Please try again later.", "says it failed"),
    ("Your order 5521 for 49.00 EUR is on hold until the payment is checked.", "never says it was paid"),
]

_BAD_AMOUNT_RIGHT = [
    "100 US dollars is about 92 euros.",
    "That refund of $100 comes to roughly €92.00 at today's rate.",
    "100 USD converts to 92 EUR.",
    "In euros the refund is EUR 92.",
    "At today's rate, the customer's 100 dollar refund equals about ninety-two euros.",
]
_BAD_AMOUNT_WRONG = [
    ("100 USD is about 108 EUR.", "the wrong figure"),
    ("I can't convert a negative amount. Please send a positive one.", "no conversion"),
    ("The conversion service is down right now; please try again later.", "an outage that did not happen"),
]
RIGHT["currency-bad-amount"] = list(_BAD_AMOUNT_RIGHT)
WRONG["currency-bad-amount"] = list(_BAD_AMOUNT_WRONG)
RIGHT["currency-bad-amount-vague"] = list(_BAD_AMOUNT_RIGHT)
WRONG["currency-bad-amount-vague"] = list(_BAD_AMOUNT_WRONG)
