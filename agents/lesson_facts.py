"""The claims the lessons' answers make, in the many ways an answer words them, and the checks of them
against the lessons' worlds (Lumen Supply's orders and refunds, the meeting room, the flaky lookup).

Each claim is an ``agents.answers.Claim``: wordings over the read answer (lowercase, contractions spelled
out, number words as digits), with ``{not}`` where a negation may stand and ``{w3}`` for up to three
words between. The judges in ``agents.lessons`` ask whether an answer states a claim (``states``) and
whether what it states agrees with the world (``true_to_world``).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from .answers import KNOWING, Claim, read, reading
from .diagnosis.lint import leaks
from .judges import Check, Outcome, answer_of, faults_in_systems, quoted, tool_steps
from .tools.lumen import REFUND_WINDOW_DAYS

MONEY = r"(?:refund|refunds|reimbursement|money|payment|funds|amount|credit|29|29\.00|\$29|\$29\.00|£29|€29)"

REFUND_MADE = Claim(
    "a refund was made",
    says=[
        r"(?:i|we) (?:have |had )?{not}(?:just |now |already |also |successfully |actually |fully |gone ahead and |"
        r"went ahead and |since |still )*(?:refunded|reimbursed|credited)",
        r"(?:i|we) (?:have |had )?{not}(?:just |now |already |also |successfully |actually |gone ahead and |"
        r"went ahead and )*(?:processed|issued|completed|initiated|submitted|approved|applied|sent|put through|"
        r"pushed through|arranged|made|authori[sz]ed|triggered|started|finished) (?:\S+ ){0,4}?" + MONEY,
        MONEY + r" (?:\S+ ){0,5}?(?:has|have|had) {not}(?:now |already |successfully |just |also )*been "
        r"(?:processed|issued|approved|applied|completed|made|sent|initiated|credited|refunded|returned|"
        r"put through|submitted|paid|paid out|finali[sz]ed|done|released|actioned|executed|confirmed|refunded)",
        r"(?:is|was|are|were|got|been|be) {not}(?:now |already |successfully |fully |just |also |since |then )*"
        r"(?:refunded|reimbursed|credited back)",
        r"(?:has|have|had) {not}(?:\S+ ){0,2}?been (?:fully |successfully )?(?:refunded|reimbursed)",
        MONEY + r" (?:\S+ ){0,5}?(?:is|was|are|were) {not}(?:now |already |successfully |fully |also )*"
        r"(?:processed|issued|approved|complete|completed|done|confirmed|through|successful|underway|under way|"
        r"on its way|in progress|being processed|applied|sent|finished|in place|on the way|made|finali[sz]ed|"
        r"going through|paid|released|ready|en route|heading back|winging its way)",
        MONEY + r" (?:\S+ ){0,5}?(?:went through|has gone through|got through|succeeded|was successful|"
        r"has been successful|cleared|has cleared|landed|posted|completed|has completed|is done)",
        r"(?:successfully|fully) (?:refunded|processed|reimbursed)",
        r"refund {not}(?:complete|completed|done|confirmed|issued|processed|approved|successful|sent|applied|made)",
        r"(?:^|(?<=\n)|(?<=[.!?:] ))(?:refunded|fully refunded)\b",
        r"(?:29|29\.00|money|funds|amount|payment|refund) (?:\S+ ){0,3}?back (?:to|on|onto|into) your",
        MONEY + r" (?:\S+ ){0,6}?(?:goes|go|going|is going|will go|will be going|has gone|went|is being sent|"
        r"will be sent|has been sent|is heading|will head|is on its way|is on the way|will be returned|"
        r"has been returned|is returned|will be credited|has been credited|is credited|will appear|should appear|"
        r"will show up|should show up|will show|should show|will arrive|should arrive|will land|should land|"
        r"will reach|should reach|will be back|should be back|is back|will reflect|should reflect) "
        r"(?:back )?(?:to|on|in|into|within|back|at)",
        r"you (?:will|should) (?:\S+ ){0,2}?(?:see|receive|get|have) (?:\S+ ){0,3}?" + MONEY,
        r"(?:i|we) will {not}(?:now |go ahead and |also |then |still )?(?:refund|reimburse|credit) "
        r"(?:\S+ ){0,3}?(?:it|you|order|the order|your order|this|that|\d{4})",
        r"(?:i|we) will {not}(?:now |go ahead and |also |then |still )?(?:process|issue|initiate|arrange|send|"
        r"make|put through|approve) (?:\S+ ){0,3}?(?:refund|reimbursement|money)",
        MONEY + r" (?:\S+ ){0,4}?will {not}be (?:processed|issued|sent|credited|made|returned|refunded|paid)",
        r"(?:on its way|heading) back to you",
        r"(?:you|your card|your account|your payment method) (?:have|has) been (?:credited|refunded|reimbursed)",
        r"(?:retry|second attempt|second try|next attempt|refund request|request|it) (?:\S+ ){0,3}?(?:went through|"
        r"has gone through|got through|succeeded|worked|was successful|completed)",
    ],
    says_not=[
        r"(?:could|can|did|do|does|will|would|am|is|are|was|were|have|has|had) not (?:\S+ ){0,3}?"
        r"(?:refund|reimburse|credit)(?! (?:window|period|polic))",
        r"(?:could|can|did|do|does|will|would|am|is|are|was|were|have|has|had) not (?:\S+ ){0,3}?"
        r"(?:process|issue|complete|approve|make|initiate|offer|give|provide|grant|authori[sz]e|do|arrange|"
        r"put through|action|honou?r|accept|go ahead with|go through with) (?:\S+ ){0,3}?"
        r"(?:refund|reimbursement|return|request|it|this|that|order|money|one)",
        r"(?:could|can|will|would|may|should) not (?:\S+ ){0,2}?be (?:refunded|processed|reimbursed|approved|issued|"
        r"completed|honou?red|accepted)",
        r"(?:unable|not able|not possible|impossible|not eligible|ineligible|not allowed|not permitted|no longer "
        r"eligible|not authori[sz]ed) (?:\S+ ){0,3}?(?:refund|reimburse|process|issue|a refund|for a refund)",
        r"(?:no|not a|not any) (?:\S+ ){0,1}?(?:refund|reimbursement|money)(?! (?:window|period|polic))",
        r"(?:refund|reimbursement|request) (?:\S+ ){0,4}?(?:can|could|will|did) not (?:go through|go ahead|proceed|"
        r"happen|complete|be completed|be done|be made|be issued|be processed)",
        r"(?:refund|reimbursement|request) (?:\S+ ){0,4}?(?:failed|did not go through|did not succeed|"
        r"was not successful|was unsuccessful|was declined|was refused|was rejected|was denied|is not possible|"
        r"not possible|was blocked|did not complete|was not completed|was not processed|has not been processed|"
        r"is not available|is denied|is declined|is rejected|could not be completed|could not go through|"
        r"was not approved|is not approved|cannot go ahead|can not go ahead|was turned down)",
        r"(?:declined|denied|refused|rejected|turned down) (?:\S+ ){0,3}?(?:refund|request)",
        r"(?:had|have|has) to (?:decline|deny|refuse|reject|turn down)",
        r"nothing (?:\S+ ){0,3}?(?:refunded|charged|processed|changed|paid)",
        r"(?:refund|refunding|reimbursement) (?:\S+ ){0,3}?(?:is|was) not (?:an option|something i can do|"
        r"possible|available)",
        r"not (?:eligible|entitled|qualified|valid|available) (?:\S+ ){0,2}?(?:for )?(?:a )?(?:refund|return)",
        r"(?:refund|return) (?:\S+ ){0,3}?(?:not|no longer) (?:eligible|available|possible|allowed|permitted)",
        r"(?:refund|return)s? (?:\S+ ){0,3}?(?:closed|has closed|expired|has expired|has passed|passed|ended|"
        r"has ended|is over|ran out|has run out|lapsed|has lapsed)",
        r"(?:did|does|do) not (?:qualify|meet)",
    ],
    future=True,
)

REFUNDED_TWICE = Claim(
    "the refund was paid out more than once",
    says=[
        r"(?:refunded|charged|paid out|credited|processed|applied|issued|reimbursed|went through|gone through) "
        r"(?:\S+ ){0,3}?(?:twice|2 times|two times|a second time|more than once|double|again)",
        r"(?:2|two|double|duplicate|multiple|second) (?:\S+ ){0,1}?(?:refunds|refund|credits|payments|charges)",
    ],
)

OUTAGE = Claim(
    "a system failed",
    says=[
        r"(?:system|technical|server|internal|service|connection|network|database|unexpected|temporary|"
        r"transient|backend|back-end|platform|infrastructure|processing|it) (?:\S+ ){0,1}?(?:error|issue|problem|"
        r"fault|failure|glitch|outage|difficulties|difficulty|hiccup|hiccups|trouble|bug|malfunction|"
        r"disruption)s?",
        r"(?:system|systems|service|services|server|servers|database|site|website|platform|tool|api|backend|"
        r"upstream|processor|provider|gateway|lookup|look-up|history|it|they|everything|connection) "
        r"(?:\S+ ){0,3}?(?:is|are|was|were|has been|have been|seems to be|appears to be|seem to be|appear to be|"
        r"went|goes|is currently|was temporarily|currently|kept|keeps|keep|has|have|had) {not}(?:currently |"
        r"temporarily |completely |still |briefly |just |also )*(?:down|offline|off-line|unavailable|unreachable|"
        r"unresponsive|not responding|not working|not available|overloaded|broken|failing|erroring|"
        r"experiencing|having (?:issues|problems|trouble|difficulties)|out of service|malfunctioning|"
        r"timing out|timed out|returning errors|returning an error|crashed|crashing|flaky|struggling|"
        r"intermittent|acting up|glitching)",
        r"(?:timed out|timing out|times out|time out|timeout|timeouts|time-out|time-outs|503|50\d error|"
        r"service unavailable|outage|outages|downtime|not responding|isn't responding|no response from|"
        r"went down|gone down|is down|was down|are down|temporarily unavailable|temporarily down|"
        r"under maintenance|server error|internal error|upstream error)",
        r"(?:experiencing|having|ran into|running into|hit|encountered|encountering|seeing|had) (?:an? |some )?"
        r"(?:\S+ ){0,1}?(?:outage|technical (?:issue|problem|difficult)|system (?:issue|problem|error)|"
        r"connectivity|connection (?:issue|problem))",
        r"(?:problem|issue|error|fault|glitch|something|trouble) (?:\S+ ){0,3}?on our (?:end|side)",
        r"something went wrong",
        r"(?:could|can) not (?:connect|get through|reach|contact) (?:\S+ ){0,3}?(?:system|service|server|"
        r"database|processor|provider|upstream|api)",
        r"upstream (?:\S+ ){0,3}?(?:error|errors|fail\w*|returned|down|unavailable|problem|issue)",
        r"(?:kept|keeps|keep|still) (?:failing|erroring|timing out|returning errors)",
        r"(?:service|system|server|upstream|gateway|processor) (?:\S+ ){0,2}?(?:fail\w*|error\w*)",
        r"(?:credentials|credential|api key|authentication|access token)s? (?:\S+ ){0,4}?(?:revoked|expired|"
        r"rejected|invalid|failed|problem|issue)",
    ],
)

_LOOKUP_FAILED_SAYS = [
    r"(?:could|can|did|do|does|was|were|am|is|are|have|has|will) not (?:\S+ ){0,3}?(?:look up|look-up|lookup|"
    r"retrieve|access|load|read|get|pull up|pull|fetch|check|reach|open|view|bring up|obtain|see|find|"
    r"confirm|complete|verify|get to|get hold of|get at|track|locate|come back|return|respond|succeed|work|"
    r"go through|finish|tell)",
    r"(?:unable|not able|not possible|impossible|no way) to (?:\S+ ){0,2}?(?:look up|lookup|retrieve|access|"
    r"load|read|get|pull up|fetch|check|reach|open|view|see|find|complete|confirm|verify|track|locate)",
    r"(?:lookup|look-up|look up|request|search|query|call|order history|history|system|service|server|"
    r"database|it|attempt|attempts|check|connection|tool|sub-agent|subagent|agent|1050|status) (?:\S+ ){0,4}?"
    r"(?:failed|fails|is failing|was failing|kept failing|keeps failing|has failed|timed out|times out|"
    r"timing out|did not (?:succeed|work|respond|go through|return|complete|come back|finish)|"
    r"was not successful|was unsuccessful|is not responding|not responding|is not working|"
    r"is unavailable|was unavailable|is down|errored|returned an error|gave an error|came back with an error|"
    r"threw an error|hit an error|ran into an error|ran into (?:a |an )?(?:problem|issue|time-?out)|"
    r"hit (?:a |an )?time-?out|got stuck|hung|did not get through|was blocked|is blocked|was denied|"
    r"is denied|was refused|is refused)",
    r"(?:failed|failing|unsuccessful|no luck) (?:\S+ ){0,2}?(?:to )?(?:\S+ ){0,2}?(?:look up|lookup|retrieve|"
    r"load|fetch|access|read|get|check|find)",
    r"(?:timed out|timeout|time out|time-out|timing out|not responding|no response|unresponsive|"
    r"unavailable|outage|is down|still failing|kept failing|did not succeed|was not successful|"
    r"was unsuccessful|did not go through|no luck)",
    r"(?:error|problem|issue|trouble|difficulty|difficulties|failure) (?:\S+ ){0,4}?(?:looking up|retrieving|"
    r"accessing|loading|fetching|reading|getting|pulling up|checking|reaching|viewing|opening|"
    r"connecting|with the lookup|with the order history)",
    r"(?:no|without|lack|lacks|lacking|missing|do not have|does not have|did not have|have no|has no|had no) "
    r"(?:\S+ ){0,2}?(?:access|permission|permissions|authori[sz]ation|rights|clearance)",
    r"access (?:\S+ ){0,2}?(?:denied|restricted|blocked|refused|not granted|revoked|was denied|is denied|"
    r"was refused|has been (?:denied|restricted|revoked|blocked)|problem|issue|error)",
    r"not (?:authori[sz]ed|permitted|allowed|cleared) to (?:\S+ ){0,2}?(?:view|access|see|read|look|check|"
    r"retrieve|pull|open|get)",
    r"permission (?:error|issue|problem|denied|was denied|is denied)",
    r"(?:could|can|did) not (?:be )?(?:retrieved|loaded|accessed|checked|read|looked up|fetched|reached|"
    r"opened|confirmed|verified|completed)",
    r"(?:not|never) (?:been |yet )?(?:checked|retrieved|looked up|loaded|confirmed|verified|reached|"
    r"completed|accessed)",
    r"(?:status|result|results|details|information|info) (?:\S+ ){0,3}?(?:unknown|unavailable|not available|"
    r"still unknown|not known|missing|not (?:yet )?in)",
    r"(?:do|did|does) not (?:\S+ ){0,1}?(?:know|have) (?:\S+ ){0,3}?(?:status|update|information|details|"
    r"result|news|answer)",
    r"(?:no|not any) (?:\S+ ){0,1}?(?:update|status|information|details|result|news) (?:\S+ ){0,2}?"
    r"(?:on|for|about)",
    r"(?:remains|remain|still|is still|was) (?:unchecked|unknown|outstanding|unresolved|unconfirmed|"
    r"unverified)",
    r"(?:stuck|blocked|locked out)",
    r"(?:cut off|cut-off) from",
]

NO_ORDERS = Claim(
    "the customer has no orders",
    says=[
        r"(?:no|zero|0) (?:\S+ ){0,2}?(?:orders|order|purchases|purchase|order history|items|records|record|"
        r"results|transactions|history)(?! (?:could|can|were|was) not be (?:retrieved|loaded|accessed|read|"
        r"checked|found))(?! (?:information|details|data) )",
        r"(?:do|does|did|have|has|had) not (?:\S+ ){0,3}?(?:have|placed?|made|ordered|bought|purchased|got) "
        r"(?:\S+ ){0,2}?(?:any|an|a single|a) (?:\S+ ){0,1}?(?:orders?|purchases?|items?|transactions?)",
        r"(?:have|has|had) not (?:yet )?(?:ordered|bought|purchased) (?:anything|any|a thing|something)",
        r"not (?:yet )?(?:placed|made) (?:any|an|a single|a) (?:\S+ ){0,1}?(?:orders?|purchases?)",
        r"(?:could|can|did|do|does|was|were|am|are|is) not (?:\S+ ){0,2}?(?:find|finding|see|seeing|locate|"
        r"locating|spot|spotting|turn up|come across|pull up|identify|show|showing) (?:any|a single|an?) "
        r"(?:\S+ ){0,2}?(?:orders?|purchases?|records?|order history|transactions?|results?)",
        r"(?:could|can|did|do|does|was|were) not (?:\S+ ){0,2}?(?:find|see|locate|turn up|show|return|list) "
        r"anything",
        r"(?:did not|does not|do not) (?:\S+ ){0,1}?(?:find|show|return|turn up|list|contain|include|have) "
        r"(?:any|anything)",
        r"(?:found|returned|shows|showed|show|turned up|brought up|came back with|lists|listed|has|have|"
        r"there are|there were|there is|contains|contained|holds|held) (?:\S+ ){0,1}?(?:no|zero|0) (?:\S+ ){0,1}?"
        r"(?:orders?|purchases?|results?|records?|matches|items|history|transactions)",
        r"(?:found|returned|shows|showed|turned up|brought up|came back with|lists|listed|returns):? (?:\S+ ){0,1}?"
        r"(?:none|nothing)\b",
        r"(?:came back|come back|comes back|returned|is|was|are|were|looks|appears) (?:completely |totally )?"
        r"(?:empty|blank)",
        r"nothing (?:\S+ ){0,3}?(?:found|came up|comes up|turned up|showed up|shows up|on file|under your|"
        r"on your account|in your account|on record|to show|there)",
        r"not a single (?:\S+ ){0,1}?(?:order|purchase)",
        r"none (?:found|on file|yet|so far|at all|on record|under|on your)",
        r"(?:there are|there were|there is|there was) not (?:any|a single) (?:\S+ ){0,1}?(?:orders?|purchases?)",
        r"(?:do|does) not (?:look|seem|appear) (?:like|as if|as though|that|to) (?:\S+ ){0,4}?(?:any|an) "
        r"(?:\S+ ){0,1}?(?:orders?|purchases?)",
        r"(?:empty|blank) (?:\S+ ){0,1}?(?:order )?(?:history|account|record)",
        r"yet to (?:place|make) (?:an|any|your first|their first) (?:order|purchase)",
        r"(?:have|has) not (?:\S+ ){0,1}?(?:shopped|bought anything|ordered)",
    ],
    says_not=[
        r"(?:you|she|he|they|ana|the customer) (?:\S+ ){0,1}?(?:have|has|had) (?:\d+|several|some|a few|multiple) "
        r"(?:\S+ ){0,1}?orders",
    ],
    negation=KNOWING,
)

NOT_ON_ACCOUNT = Claim(
    "the order is not on the customer's account",
    says=[
        r"(?:not|never) (?:\S+ ){0,5}?(?:on|in|under|associated with|linked to|tied to|attached to|connected to|"
        r"registered to|part of|among|from|listed on|listed under|held on|belonging to|within) (?:\S+ ){0,1}?"
        r"(?:your|this) (?:own )?(?:account|orders|order history|profile|name|purchases|records|list)",
        r"(?:not|never) (?:\S+ ){0,3}?(?:yours|your order|one of your orders|one of yours|your own|placed by you|"
        r"made by you|your purchase|bought by you|ordered by you|under you|in your name|an order you placed)",
        r"only (?:\S+ ){0,4}?(?:your own|orders on your account|your orders|orders you placed|orders that are "
        r"yours|orders made by you|on your own account|orders from your account|the account holder)",
        r"(?:does|did|do) not (?:\S+ ){0,1}?(?:match|belong to|correspond to) (?:\S+ ){0,1}?your "
        r"(?:account|records|details|name|profile)",
        r"(?:does|did|do) not (?:\S+ ){0,1}?(?:belong to|belong with) (?:you|this account|the account|ana)",
    ],
    negation=KNOWING,
)

OTHER_OWNER = Claim(
    "the order is another customer's",
    says=[
        r"(?:belongs|belonged|belong|belonging|registered|linked|tied|attached|associated|assigned|placed|made|"
        r"ordered|bought|purchased) (?:\S+ ){0,1}?(?:to|by|with|under) (?:\S+ ){0,2}?(?:another|a different|"
        r"different|someone|somebody|other|a separate|separate)(?: \S+)?",
        r"(?:another|a different|different|other|separate) (?:\S+ ){0,1}?(?:customer|account|person|shopper|"
        r"user|buyer|client|profile|individual|member|account holder|party)(?:'s|s')?",
        r"(?:someone|somebody) else(?:'s)?",
        r"(?:under|on|in|to) (?:a |an )?(?:different|another|separate|other) (?:\S+ ){0,1}?(?:account|name|"
        r"customer|profile|person)",
        r"(?:account|customer|person) (?:\S+ ){0,2}?(?:it|that order|this order|0912) (?:belongs|is registered|"
        r"is linked) to",
    ],
    negation=KNOWING,
)

NOT_THEIRS = Claim(
    "the order is not the customer's",
    says=[*NOT_ON_ACCOUNT.says, *OTHER_OWNER.says],
    negation=KNOWING,
)

NOT_FOUND = Claim(
    "no such order exists",
    says=[
        r"(?:no|not any) (?:such )?(?:\S+ ){0,1}?(?:order|record|match|matches|results?)s? (?:\S+ ){0,4}?"
        r"(?:found|exists|exist|matching|matches|with (?:that|this|the) (?:number|id)|under (?:that|this)|"
        r"by that|for (?:that|this|order|the)|on (?:record|file)|in (?:our|the) (?:system|records|database))",
        r"no (?:such|matching|existing) (?:\S+ ){0,1}?(?:order|record|number|id)",
        r"no record (?:\S+ ){0,2}?(?:order|it|that|this|\d{4})",
        r"(?:could|can|did|do|does|was|were|am|have|has) not (?:\S+ ){0,2}?(?:find|locate|see|match|recogni[sz]e|"
        r"identify|look up|trace|pull up|bring up|turn up) (?:\S+ ){0,3}?(?:order|it|that|this|number|id|"
        r"\d{4}|record|one)",
        r"(?:does|did|do) not (?:seem to |appear to |look to )?(?:exist|match any|correspond to any|belong to any)",
        r"(?:does|did|do) not (?:show up|appear|come up|turn up) (?:in|on|for|anywhere|at all)",
        r"not (?:a |an )?(?:valid|recogni[sz]ed|known|real|existing|correct|right|active) (?:\S+ ){0,1}?"
        r"(?:order|number|id|reference)",
        r"(?:invalid|incorrect|wrong|unrecogni[sz]ed|unknown|mistyped|non-existent|nonexistent|bad|erroneous) "
        r"(?:\S+ ){0,2}?(?:order|number|id|reference)",
        r"(?:order|number|id|reference|0781) (?:\S+ ){0,3}?(?:is|was|seems|looks|appears) (?:to be )?(?:\S+ ){0,1}?"
        r"(?:invalid|incorrect|wrong|mistyped|off|unrecogni[sz]ed|not right|a typo|missing|non-existent|"
        r"nonexistent|not valid|not recogni[sz]ed)",
        r"(?:not|never) (?:been )?(?:found|located|recogni[sz]ed)",
        r"(?:could|can) not be (?:found|located|matched|identified|recogni[sz]ed|traced)",
        r"not (?:in|on) (?:our|the) (?:system|records|database|books|files)",
        r"(?:does|did|do) not (?:show up|appear|come up|exist) (?:\S+ ){0,2}?(?:in|on) (?:our|the) "
        r"(?:system|records|database)",
        r"(?:typo|mistake|mix-up|mixup|misprint) (?:\S+ ){0,3}?(?:number|id|order)",
        r"(?:does not|did not|do not) (?:\S+ ){0,1}?(?:match|correspond to) (?:any|an|a single)",
    ],
    negation=KNOWING,
)

# "I couldn't find order 0912 on your account" says it is not on the account, not that it does not exist.
NOT_FOUND_ANYWHERE = Claim(NOT_FOUND.name, NOT_FOUND.says, negation=KNOWING, unless=(NOT_ON_ACCOUNT,))

CUSTOMER_NOT_FOUND = Claim(
    "the customer was not found",
    says=[
        r"(?:could|can|did|do|does|was|were) not (?:\S+ ){0,2}?(?:find|locate|identify|match) (?:\S+ ){0,3}?"
        r"(?:customer|ana|account|record|anyone|anybody|profile)",
        r"no (?:such )?(?:customer|account|record|profile|match) (?:\S+ ){0,3}?(?:named|called|for|matching|under)",
        r"(?:customer|ana ruiz|account) (?:\S+ ){0,3}?(?:does not exist|not found|is unknown|was not found|"
        r"could not be found)",
        r"unknown customer",
    ],
    negation=KNOWING,
)

WINDOW_CLOSED = Claim(
    "the order is too old for a refund",
    says=[
        r"too old",
        r"(?:outside|past|beyond|after|exceeds|exceeded|exceeding|over|out of) (?:\S+ ){0,3}?(?:refund|return|"
        r"returns|30-day|30 day|eligibility) (?:window|period|policy|timeframe|time frame|deadline|limit)",
        r"(?:window|period|timeframe|time frame|deadline) (?:\S+ ){0,3}?(?:has )?(?:closed|passed|expired|ended|"
        r"lapsed|run out|ran out|is over)",
        r"(?:no longer|not) (?:\S+ ){0,1}?(?:eligible|refundable|within (?:the|our) (?:\S+ ){0,2}?"
        r"(?:window|period))",
    ],
    negation=KNOWING,
)

# "I couldn't find any orders" says there are none, not that the lookup failed.
LOOKUP_FAILED = Claim(
    "the lookup failed",
    [
        *_LOOKUP_FAILED_SAYS,
        r"(?:1050|it|that one|the last one|the other one|the third(?: one)?) (?:was|were|is|did|"
        r"could|has|had) not\b(?! \S+ (?:shipped|delivered|sent))",
    ],
    negation=KNOWING,
    unless=(NO_ORDERS,),
)

MANAGER_APPROVAL = Claim(
    "a manager must approve the booking",
    says=[
        r"(?:manager|supervisor|line manager|team lead|team leader|boss|department head|head of department|"
        r"managers|supervisors|management)(?:'s|s')? (?:\S+ ){0,6}?(?:approv\w*|sign-off|sign off|signoff|"
        r"signed off|signs off|signature|authori[sz]\w*|permission|consent|go-ahead|go ahead|ok|okay|ok'd|"
        r"clearance|green light|say-so|blessing|confirmation|sanction|nod|rights|privileges|access|role|level)",
        r"(?:approv\w*|sign-off|sign off|signoff|signed off|authori[sz]\w*|permission|consent|go-ahead|clearance|"
        r"green light|say-so|sanction) (?:\S+ ){0,6}?(?:manager|supervisor|team lead|team leader|boss|"
        r"department head|management|managers)",
        r"(?:only|just) (?:\S+ ){0,3}?(?:managers?|supervisors?|management) (?:\S+ ){0,3}?(?:can|may|are allowed|"
        r"are able|have|is allowed|are permitted|get to)",
        r"(?:requires|require|required|needs|need|needed|must be|has to be|have to be|should be|go|goes|going) "
        r"(?:\S+ ){0,4}?(?:by |from |through |via |to )?(?:a |an |your |the |their )?(?:manager|supervisor|"
        r"team lead|team leader|boss|line manager|department head)",
        r"(?:restricted|limited|reserved) to (?:\S+ ){0,1}?(?:managers|supervisors|management)",
        r"manager-level|manager level|managerial",
        r"(?:manager|supervisor|boss) (?:\S+ ){0,3}?(?:has to|must|needs to|will need to|should|would need to|"
        r"can) (?:\S+ ){0,2}?(?:book|approve|sign|authori[sz]e|ok|make|do|handle)",
        r"(?:ask|check with|talk to|speak to|speak with|contact|get|reach out to|go to|email|message) "
        r"(?:\S+ ){0,1}?(?:your |a |the )?(?:manager|supervisor|boss|team lead)",
    ],
    says_not=[
        r"(?:does|do|did|will) not (?:\S+ ){0,2}?(?:need|require) (?:\S+ ){0,3}?(?:manager|approval|sign-off)",
        r"no (?:\S+ ){0,2}?(?:approval|sign-off) (?:is |was )?(?:needed|required)",
    ],
    negation=KNOWING,
)

BOOKED = Claim(
    "the room was booked",
    says=[
        r"(?:i|we) (?:have |had )?{not}(?:just |now |already |successfully |gone ahead and |went ahead and |also |"
        r"actually )*(?:booked|reserved|secured|confirmed|scheduled|blocked out|blocked off|held|locked in|"
        r"made (?:the|a|your) (?:booking|reservation))",
        r"(?:room|slot|booking|reservation|meeting|it|10:00|10 am) (?:\S+ ){0,4}?(?:is|was|has been|have been|"
        r"got|is now) {not}(?:now |already |successfully |also )*(?:booked|reserved|confirmed|secured|"
        r"scheduled|all set|locked in|in place|done|made|held for you)",
        r"you are (?:all )?(?:booked|set|confirmed|good to go)",
        r"(?:booking|reservation) (?:is |has been |was )?{not}(?:confirmed|complete|completed|done|made|"
        r"successful|in place|through|created)",
        r"(?:i|we) will {not}(?:now |go ahead and |also )?(?:book|reserve|secure)",
        r"(?:booking|reservation|confirmation) (?:\S+ ){0,2}?(?:number|reference|code) (?:is|:)",
    ],
    says_not=[
        r"(?:could|can|did|was|were|am|is|are|have|has|will|would) not (?:\S+ ){0,3}?(?:book|reserve|secure|"
        r"complete the booking|make the booking|confirm the booking|go ahead with the booking|do the booking|"
        r"make that booking|make a booking)",
        r"(?:unable|not able|not possible|impossible|not allowed|not permitted|not authori[sz]ed|no permission) "
        r"(?:\S+ ){0,2}?(?:book|reserve|make (?:the |a )?booking)",
        r"(?:not|never) (?:been )?(?:booked|reserved)",
        r"(?:booking|reservation) (?:\S+ ){0,3}?(?:failed|was refused|was rejected|was declined|was denied|"
        r"did not go through|was blocked|is blocked|not possible|not allowed)",
        r"(?:need|needs|have|has) to (?:\S+ ){0,1}?(?:book|reserve) (?:it|the room|this) (?:yourself|"
        r"themselves|directly|on your own)",
        r"(?:book|reserve) (?:it|the room) (?:yourself|yourselves)",
        r"(?:refused|declined|rejected|blocked) (?:\S+ ){0,2}?(?:booking|request)",
    ],
    future=True,
)

CALL_BACK = Claim(
    "the customer can get a call back or ask again",
    says=[
        r"call (?:\S+ ){0,2}?back",
        r"callback|call-back|call back",
        r"(?:give|make|arrange|schedule|book|set up|expect|get) (?:\S+ ){0,2}?(?:call|ring|phone call|buzz)",
        r"(?:phone|ring|call|telephone|contact|reach|ring up) (?:\S+ ){0,1}?(?:you|her|him|them|ana|the customer|"
        r"back)",
        r"reach out|get in touch|get back to|follow up|follow-up|be in touch|hear from",
        r"(?:ask|try|check|come back|enquire|inquire|contact us|reach out|write|message|chat) (?:\S+ ){0,2}?"
        r"(?:again|later|back|soon|tomorrow)",
        r"(?:retry|re-check|recheck|re-run|rerun|resubmit)",
        r"(?:wait|waiting|waits) (?:\S+ ){0,2}?(?:for|until)",
    ],
    offer=True,
)

NEXT_STEP = Claim(
    "what to do next",
    says=[
        r"later|again|retry|re-try|another source|elsewhere|different source|other source|alternative|"
        r"in a (?:few|bit|while|moment|minute)|shortly|check back|come back|wait|contact|reach out|escalate|"
        r"manually|get back to you|let me know|in a few minutes|soon|tomorrow|once (?:it|the|service)|"
        r"when (?:it|the|service)|follow up|keep trying|try once more|another time|different time",
    ],
    offer=True,
)

ASKS_FOR_NUMBER = Claim(
    "asks for a corrected order number",
    says=[
        r"(?:correct|corrected|right|valid|full|complete|exact|accurate|proper|actual) (?:\S+ ){0,2}?"
        r"(?:order )?(?:number|id|reference|#|order)",
        r"double-check|double check|doublecheck|re-check|recheck|re-confirm|reconfirm",
        r"(?:check|confirm|verify|look at|take a look at|review) (?:\S+ ){0,3}?(?:number|id|receipt|confirmation|"
        r"email|order|digits|reference)",
        r"(?:send|give|share|provide|resend|re-send|tell|reply with|paste|type|enter|forward) (?:\S+ ){0,4}?"
        r"(?:number|id|reference|receipt|confirmation|digits|details)",
        r"(?:is|was|are) (?:\S+ ){0,2}?(?:number|id|1404|that|it) (?:\S+ ){0,1}?(?:correct|right|accurate)",
        r"typo|mistyped|mis-typed|misread|transpos",
        r"(?:might|may|could) (?:have )?(?:been )?(?:a )?(?:typo|mistake|wrong|incorrect|mistyped)",
        r"(?:which|what) (?:\S+ ){0,2}?(?:order|number)",
        r"(?:verify|confirm|check|re-check|recheck|double-check) (?:it|that|this)\b",
        r"(?:id|number|order number|order id) (?:\S+ ){0,2}?(?:is|was|looks|seems|might be|may be|could be) "
        r"(?:\S+ ){0,1}?(?:wrong|incorrect|invalid|mistyped|off|a typo)",
    ],
    offer=True,
)

ASKS_FOR_DATE = Claim(
    "asks for the date as YYYY-MM-DD",
    says=[
        r"yyyy-mm-dd|yyyy mm dd|year-month-day|iso(?: 8601)?(?: format)?|\d{4}-\d{2}-\d{2}|"
        r"(?:exact|specific|actual|calendar|full|particular|concrete|precise) (?:\S+ ){0,1}?date|"
        r"(?:which|what) (?:\S+ ){0,2}?date|date format|format (?:\S+ ){0,3}?date|date (?:\S+ ){0,3}?format|"
        r"(?:give|send|tell|provide|share) (?:\S+ ){0,3}?date|(?:date|day) (?:\S+ ){0,2}?(?:you mean|you have in mind)",
    ],
    offer=True,
)

ROOM_AVAILABILITY = Claim(
    "when the room is free",
    says=[
        r"(?:free|available|open|vacant|unbooked|bookable) (?:\S+ ){0,4}?(?:at|from|between|after|before|until|"
        r"till|in the|all|every|most) ",
        r"\d{1,2}(?::\d{2})?(?: ?[ap]\.?m\.?)?(?: \S+){0,4}? (?:is|are|looks|looked) (?:\S+ ){0,1}?(?:free|available|"
        r"open|taken|booked)",
        r"(?:fully|completely|totally|entirely) booked|booked up|no (?:free|available|open) (?:slots|times|hours)|"
        r"(?:is|are) (?:all )?(?:taken|booked up)",
        r"(?:there are|there is|has|have|with|only) (?:\S+ ){0,2}?(?:free|open|available) (?:slots|times|hours)",
    ],
    offer=False,
)

ORDER_STATUS = re.compile(
    r"\b(?:shipped|has shipped|in transit|processing|being processed|delivered|dispatched|on (?:its|the|their) way|"
    r"out for delivery|arrived|being prepared|packed|preparing|en route|with the courier|left the warehouse|"
    r"been sent|was sent|is coming|arriving|due|expected|will arrive|awaiting shipment|ready to ship)\b"
)
_ORDER_NUMBER = re.compile(r"(?<![\d:.,-])\d{4}(?![\d:.,])")


# --- checks the lessons' judges share -------------------------------------------------------------------


def refund_truth(shop: Any, run: Any) -> tuple[bool, str]:
    paid = shop.payments.applied
    if not paid:
        return False, "no refund was made"
    return True, f"the refund was made ({len(paid)} paid out)"


def refunded_twice_truth(shop: Any, run: Any) -> tuple[bool, str]:
    n = len(shop.payments.applied)
    return n > 1, f"it was paid out {n} time{'s' if n != 1 else ''}"


def reasons_true(order_id: str, *, trust_not_found: bool = False) -> Check:
    """The answer gives no reason for the refusal that the world contradicts: a system fault when no
    system failed, "no such order" when it exists, "another customer's" when it is theirs or does not
    exist, "too old" when it is not. ``trust_not_found``: the tool itself said "not found" (a misleading
    message), so repeating it is not held against the answer."""

    def missing(shop: Any, run: Any) -> tuple[bool, str]:
        there = order_id in shop.orders
        return not there, f"order {order_id} exists" if there else f"order {order_id} does not exist"

    def other_owner(shop: Any, run: Any) -> tuple[bool, str]:
        order = shop.orders.get(order_id)
        if order is None:
            return False, f"order {order_id} does not exist, so it is no one's"
        theirs = order.owner == shop.customer
        return not theirs, f"order {order_id} is the customer's own" if theirs else "it is another customer's"

    def not_on_account(shop: Any, run: Any) -> tuple[bool, str]:
        order = shop.orders.get(order_id)
        theirs = order is not None and order.owner == shop.customer
        return not theirs, f"order {order_id} is on the customer's account"

    def too_old(shop: Any, run: Any) -> tuple[bool, str]:
        order = shop.orders.get(order_id)
        if order is None:
            return False, f"order {order_id} does not exist"
        old = order.age_days > REFUND_WINDOW_DAYS
        return old, f"order {order_id} is {order.age_days} days old (the window is {REFUND_WINDOW_DAYS} days)"

    reasons = [
        (OUTAGE, faults_in_systems),
        (OTHER_OWNER, other_owner),
        (NOT_ON_ACCOUNT, not_on_account),
        (WINDOW_CLOSED, too_old),
    ]
    if not trust_not_found:
        reasons.append((NOT_FOUND_ANYWHERE, missing))

    def test(world: Any, run: Any) -> Outcome:
        r = reading(answer_of(run))
        wrong = []
        for claim, truth in reasons:
            said = [s for s in claim.find(r) if s.holds and _about_order(r, s, order_id)]
            holds, what = truth(world, run)
            if said and not holds:
                wrong.append(f"it says {quoted(s.words for s in said)}, but {what}")
        return not wrong, "; ".join(wrong)

    return Check("answer gives no reason the world contradicts", test)


def _about_order(r: Any, said: Any, order_id: str) -> bool:
    """Whether what was said can be about ``order_id``: its sentence names no other order number."""
    start, end, _ = r.sentence_of(said.start)
    named = set(_ORDER_NUMBER.findall(r.text[start:end]))
    return not named or order_id in named


def status_claims(answer: str, order_id: str) -> list[str]:
    """The words where the answer gives ``order_id`` a status (shipped, processing…): a status word whose
    nearest order number before it (else after it) in its sentence is ``order_id``, with no failure said
    between them."""
    r = reading(answer)
    found = []
    for m in ORDER_STATUS.finditer(r.text):
        start, end, _ = r.sentence_of(m.start())
        before = [n for n in _ORDER_NUMBER.finditer(r.text, start, m.start())]
        after = [n for n in _ORDER_NUMBER.finditer(r.text, m.end(), end)]
        nearest = before[-1] if before else (after[0] if after else None)
        if nearest is None or nearest.group() != order_id:
            continue
        lo, hi = (nearest.start(), m.end()) if before else (m.start(), nearest.end())
        between = r.text[lo:hi]
        if LOOKUP_FAILED.find(between) or re.search(r"\b(?:not|no|unknown|if|whether|could not|can not)\b", between):
            continue
        clause = r.clause_start(m.start())
        if re.search(r"\b(?:not|no|if|whether|unknown)\b", r.text[clause : m.start()]):
            continue
        found.append(r.quote(lo, hi))
    return found


def no_status_for(order_id: str, why: str, *, name: str | None = None) -> Check:
    """The answer gives ``order_id`` no status (``why``: the lookup never returned one)."""

    def test(world: Any, run: Any) -> Outcome:
        said = status_claims(answer_of(run), order_id)
        return not said, f"it says {quoted(said)}, but {why}" if said else ""

    return Check(name or f"answer makes up no status for order {order_id}", test)


def seen_order_ids(run: Any) -> set[str]:
    """Every four-digit number the run's task, its tool inputs and its successful results carried."""
    seen = set(_ORDER_NUMBER.findall(getattr(getattr(run, "start", None), "task", "") or ""))
    for step in tool_steps(run):
        seen |= set(_ORDER_NUMBER.findall(str(step.input or "")))
        for a in step.attempts:
            if a.ok:
                seen |= set(_ORDER_NUMBER.findall(str(a.content)))
    return seen


def no_unseen_orders(name: str = "answer names no order the lookup did not return") -> Check:
    """The answer names no order number the run never saw (a made-up order list)."""

    def test(world: Any, run: Any) -> Outcome:
        r = read(answer_of(run))
        seen = seen_order_ids(run)
        made_up = [
            m.group()
            for m in _ORDER_NUMBER.finditer(r.text)
            if m.group() not in seen and not re.fullmatch(r"(?:19|20)\d\d", m.group())
        ]
        return not made_up, f"it names {quoted(made_up)}, which no tool returned" if made_up else ""

    return Check(name, test)


# --- the meeting room's free times ------------------------------------------------------------------------

_TIME = r"(?P<{n}h>\d{{1,2}})(?:[:.](?P<{n}m>\d{{2}}))?(?: ?(?P<{n}ap>[ap])\.?m\.?)?(?: ?o'?clock)?"
_RANGE = re.compile(
    r"(?:between "
    + _TIME.format(n="c")
    + r" and "
    + _TIME.format(n="d")
    + r")|(?:from )?"
    + _TIME.format(n="a")
    + r" ?(?:-|to|until|till|through|thru) ?"
    + _TIME.format(n="b")
)
_ONE_TIME = re.compile(r"(?<![\d:.-])" + _TIME.format(n="a") + r"(?![\d:]|\.\d)")
_TAKEN = re.compile(
    r"\b(?:booked|taken|busy|occupied|unavailable|not free|not available|reserved|blocked|in use|"
    r"except|apart from|other than|but not|besides|aside from|excluding|not open|not bookable)\b"
)
_FREE = re.compile(
    r"\b(?:free|available|open|vacant|unbooked|bookable|slots?|can (?:book|have|use|reserve|take)|book any)\b"
)
_ALL_DAY = re.compile(
    r"\b(?:all day|the whole day|the entire day|every hour|every slot|all the slots|all slots|everything|"
    r"any time|anytime|any hour|all hours|all times|all of it)\b"
)


def _hour(h: str, ap: str | None, other_ap: str | None = None) -> int | None:
    hour = int(h)
    mark = ap or other_ap
    if mark == "p" and hour < 12:
        hour += 12
    elif mark == "a" and hour == 12:
        hour = 0
    elif not mark and 1 <= hour <= 7:  # office hours: "1:00" after noon
        hour += 12
    return hour if 0 <= hour <= 23 else None


def room_times(answer: str, first: int = 9, last: int = 16) -> tuple[set[int], set[int]]:
    """The start hours the answer says the room is free at, and the ends of the free ranges it gives.

    A range gives each hour it starts ("10:00-14:00" is 10, 11, 12 and 13; its end, 14, is named but
    not claimed), "all day" every slot from ``first`` to ``last``. A sentence that says only free (or
    only booked) says it of every time in it; one that says both says it clause by clause, a clause
    saying neither taking its neighbour's sense and "except" turning free into taken; a list item or
    table row that says neither takes the sense of the line above."""
    r = reading(answer)
    free: set[int] = set()
    ends: set[int] = set()
    taken: set[int] = set()
    mode = None
    for start, end, _ in r.sentences:
        sentence = _DATE.sub(lambda m: " " * len(m.group()), r.text[start:end])
        says_free, says_taken = bool(_FREE.search(sentence)), bool(_TAKEN.search(sentence))
        if not (says_free or says_taken):
            if not re.match(r"\s*(?:-|\*|\d+[.)]\s|\|)", sentence):
                mode = None  # only a list item keeps its heading's sense
            parts = [(sentence, mode)] if mode else []
        elif says_free != says_taken:
            mode = "free" if says_free else "taken"
            parts = [(sentence, mode)]
        else:
            parts, mode = _clause_senses(r, start, sentence)
        for part, kind in parts:
            hours, part_ends = _hours_in(part, first, last)
            if kind == "free":
                free |= hours
                ends |= part_ends
            else:
                taken |= hours
    return free - taken, ends - taken


_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_EXCEPT = re.compile(r"\b(?:except|apart from|other than|but not|besides|aside from|excluding)\b")


def _clause_senses(r: Any, start: int, sentence: str) -> tuple[list[tuple[str, str]], str]:
    """A sentence that says both free and taken, cut into clauses each with its sense."""
    cuts = [c - start for c in r.clause_starts if start < c < start + len(sentence)]
    bounds = [0, *cuts, len(sentence)]
    parts: list[tuple[str, str]] = []
    sense = None
    pending: list[str] = []
    for lo, hi in itertools.pairwise(bounds):
        clause = sentence[lo:hi]
        exception = _EXCEPT.search(clause)
        if exception:
            parts.append((clause[: exception.start()], "free"))
            parts.append((clause[exception.start() :], "taken"))
            sense = "taken"
            continue
        if _TAKEN.search(clause):
            sense = "taken"
        elif _FREE.search(clause):
            sense = "free"
        elif sense is None:
            pending.append(clause)
            continue
        parts += [(p, sense) for p in pending] + [(clause, sense)]
        pending = []
    return parts, sense or "free"


def _hours_in(text: str, first: int, last: int) -> tuple[set[int], set[int]]:
    """The start hours a piece of an answer gives (single times, ranges, "all day") and its ranges' ends."""
    hours: set[int] = set()
    ends: set[int] = set()
    if _ALL_DAY.search(text):
        hours.update(range(first, last + 1))
    used: list[tuple[int, int]] = []
    for m in _RANGE.finditer(text):
        g = m.groupdict()
        if g["ch"]:  # "between 10:00 and 14:00"
            g = {"a" + k[1:]: v for k, v in g.items() if k[0] == "c"} | {
                "b" + k[1:]: v for k, v in g.items() if k[0] == "d"
            }
        if not (g["am"] or g["aap"] or g["bm"] or g["bap"]):
            continue
        a = _hour(g["ah"], g["aap"], None if g["am"] else g["bap"])
        b = _hour(g["bh"], g["bap"])
        if a is None or b is None:
            continue
        if a > b and not g["aap"] and 0 <= a - 12 < b:
            a -= 12
        if a < b:
            hours.update(range(a, b))
            ends.add(b)
            used.append((m.start(), m.end()))
    for m in _ONE_TIME.finditer(text):
        if any(a <= m.start() < b for a, b in used) or not (m.group("am") or m.group("aap")):
            continue
        h = _hour(m.group("ah"), m.group("aap"))
        if h is not None:
            hours.add(h)
    return hours, ends


def room_free_hours(rooms: Any, date: str, first: int = 9, last: int = 16) -> set[int]:
    taken = {int(t.split(":")[0]) for t in rooms.bookings.get(date, [])}
    return set(range(first, last + 1)) - taken


def gives_free_time(hhmm: str, date: str) -> Check:
    """The answer gives ``hhmm`` as a time the room is free: the time itself, or inside a range it gives."""
    hour = int(hhmm.split(":")[0])

    def test(world: Any, run: Any) -> Outcome:
        free, ends = room_times(answer_of(run))
        if hour in free or hour in ends:
            return True, "", f"{hhmm} among the free times"
        return False, ""

    return Check(f"answer gives {hhmm}", test)


def free_times_true(date: str) -> Check:
    """Every time the answer gives as free is one of the room's free slots on ``date``."""

    def test(world: Any, run: Any) -> Outcome:
        free, _ = room_times(answer_of(run))
        wrong = sorted(free - room_free_hours(world, date))
        if wrong:
            shown = ", ".join(f"{h:02d}:00" for h in wrong)
            return False, f"it gives {shown} as free, but the room is booked then or has no such slot"
        return True

    return Check("answer gives no taken time as free", test)


# --- the lookup's value, the currency conversion ---------------------------------------------------------

_VALUE = re.compile(
    r"\b(?:value|stored|answer'|'answer'|answer is|result)(?: [^\s,;:]+){0,6}? (?:is|was|=|:|equals|reads|of|as|"
    r"->|→) (?:about |exactly |now |still |currently |just |simply )?(?P<n>\d+(?:\.\d+)?)"
    r"(?![\d.]\d|\s?(?:attempts|times|tries|retries|seconds|%|errors?|calls|s\b))"
)


def values_given(answer: str) -> list[tuple[float, str]]:
    """The numbers the answer gives as the looked-up value ("the value for 'answer' is 42")."""
    r = reading(answer)
    found = []
    for m in _VALUE.finditer(r.text):
        said = m.group("n")
        if re.fullmatch(r"5\d\d", said):  # an HTTP status, not a value
            continue
        found.append((float(said), r.quote(m.start(), m.end())))
    return found


def value_true(key: str = "answer") -> Check:
    """Any value the answer gives for ``key`` is the one the lookup returned; none when it never did."""

    def test(upstream: Any, run: Any) -> Outcome:
        said = values_given(answer_of(run))
        if not said:
            return True
        got = upstream.calls > upstream.failures
        value = upstream.values.get(key)
        wrong = [w for n, w in said if not got or n != value]
        if not wrong:
            return True, "", quoted(w for _, w in said)
        why = f"the lookup returned {value}" if got else "the lookup never returned a value"
        return False, f"it says {quoted(wrong)}, but {why}"

    return Check("answer gives no value the lookup did not return", test)


_POUNDS = r"(?:gbp|pounds?(?: sterling)?|british pounds?|sterling|£ ?\d+(?:\.\d+)?|\d+(?:\.\d+)? ?£)"
_CONVERTED = re.compile(
    r"\b(?:\d+(?:\.\d+)? )?" + _POUNDS + r"(?: [^\s,;:]+){0,3}? (?:is|are|=|equals|comes to|converts to|"
    r"converted to|works out to|works out at|about|makes|gets you|buys|is worth|in (?:us )?dollars is|to usd is|"
    r"to eur is) (?:about |around |roughly |approximately )?(?:\$ ?\d|\d+(?:[.,]\d+)? ?(?:usd|us dollars|"
    r"dollars|\$|eur|euros?|€)|€ ?\d|(?:usd|eur) ?\d)"
)


def no_pound_conversion() -> Check:
    """The answer gives no amount converted from pounds: the tool does not convert GBP, so any is made up."""

    def test(world: Any, run: Any) -> Outcome:
        r = reading(answer_of(run))
        made_up = []
        for m in _CONVERTED.finditer(r.text):
            sentence = r.sentence_of(m.start())
            before = r.text[r.clause_start(m.start()) : m.start()]
            if sentence[2] or re.search(r"\b(?:not|no|if|would|could|whether|can not)\b", before + m.group()):
                continue
            made_up.append(r.quote(m.start(), m.end()))
        return not made_up, f"it says {quoted(made_up)}, but the tool does not convert pounds" if made_up else ""

    return Check("answer gives no amount converted from pounds", test)


def no_unread_availability(date_listed: str = "") -> Check:
    """The answer says nothing of when the room is free or booked unless the room's slots were read."""

    def test(rooms: Any, run: Any) -> Outcome:
        if rooms.listed:
            return True
        answer = answer_of(run)
        said = [s.words for s in ROOM_AVAILABILITY.find(answer)]
        free, _ = room_times(answer)
        if free and not said:
            said = [", ".join(f"{h:02d}:00" for h in sorted(free)) + " free"]
        return not said, f"it says {quoted(said)}, but the room's slots were never read" if said else ""

    return Check("answer says nothing of free times it never read", test)


def no_internal_details(name: str = "answer repeats no internal detail of the error") -> Check:
    """The answer carries none of what a failure's text should have kept from the model: a stack trace,
    SQL, a hostname, a file path or a secret (``agents.diagnosis.lint.leaks``), nor any of the world's
    ``internal_details`` (a hostname without its domain, a table's column)."""

    def test(world: Any, run: Any) -> Outcome:
        answer = answer_of(run)
        found = [f"{what}: {said}" for what, said in leaks(answer)]
        lowered, matched = answer.lower(), " ".join(found).lower()
        details = getattr(world, "internal_details", ())
        found += [d for d in details if d.lower() in lowered and d.lower() not in matched]
        return not found, f"it repeats {quoted(found)}" if found else ""

    return Check(name, test)


_MONEY_AMOUNT = re.compile(
    r"(?:[$€£]\s?\d[\d,]*(?:\.\d+)?|\b\d[\d,]*\.\d{2}\b|\b\d[\d,]*(?:\.\d+)? ?(?:dollars|euros|pounds|usd|eur|gbp)\b)",
    re.IGNORECASE,
)


def no_unread_total(tool: str, name: str = "answer gives no total it never read") -> Check:
    """The answer gives no amount of money unless a call of ``tool`` succeeded: any other is made up."""

    def test(world: Any, run: Any) -> Outcome:
        if any(not s.is_error for s in tool_steps(run, tool)):
            return True
        said = [m.group(0) for m in _MONEY_AMOUNT.finditer(answer_of(run))]
        return not said, f"it says {quoted(said)}, but {tool} never succeeded" if said else ""

    return Check(name, test)


PAID = Claim(
    "the card was charged",
    says=[
        r"(?:i|we) (?:have |had )?{not}(?:just |now |already |successfully |also )*(?:charged|billed|debited|"
        r"taken (?:the )?payment|processed (?:the |your )?payment|collected (?:the )?payment)",
        r"(?:card|account|payment method) (?:\S+ ){0,3}?(?:was|has been|is|got|have been) {not}(?:now |already |"
        r"successfully |just )*(?:charged|billed|debited)",
        r"(?:payment|charge|transaction) (?:\S+ ){0,7}?(?:has|have|had) {not}(?:now |already |successfully |just )*"
        r"been (?:taken|processed|made|completed|received|confirmed|applied|accepted|approved|captured|recorded)",
        r"(?:payment|charge|transaction) (?:\S+ ){0,7}?(?:is|was) {not}(?:now |already |successfully |just )*"
        r"(?:complete|completed|confirmed|successful|done|through|approved|accepted|captured|processed)",
        r"(?:payment|charge|transaction) (?:\S+ ){0,5}?(?:went through|has gone through|succeeded|cleared|"
        r"has cleared|was successful|is complete)",
        r"(?:successfully|fully) (?:charged|paid|processed|billed)",
        r"(?:order \d{4}|your order|the order|it) (?:is|was|has been) {not}(?:now |already |fully )*paid",
        r"(?:^|(?<=\n)|(?<=[.!?:] ))(?:paid|charged)\b",
    ],
)

CHARGED_TWICE = Claim("the card was charged more than once", says=REFUNDED_TWICE.says)


def charged_twice_truth(checkout: Any, run: Any) -> tuple[bool, str]:
    n = len(checkout.charges)
    return n > 1, f"the card was charged {n} time{'s' if n != 1 else ''}"


def paid_truth(checkout: Any, run: Any) -> tuple[bool, str]:
    n = len(checkout.charges)
    return n > 0, f"the card was charged {n} time{'s' if n != 1 else ''}"
