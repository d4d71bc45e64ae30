// Small data-attribute hooks; every page works without this file.

// [data-compare-picker]: the compare button is enabled only when exactly two runs are ticked.
function updateComparePicker(form) {
  const ticked = form.querySelectorAll('input[name="run"]:checked').length;
  const button = form.querySelector("[data-compare-button]");
  if (!button) return;
  button.disabled = ticked !== 2;
  button.textContent = ticked === 2 ? "Compare the two ticked runs" : `Tick two runs to compare (${ticked} ticked)`;
}

function updateAllComparePickers() {
  document.querySelectorAll("[data-compare-picker]").forEach(updateComparePicker);
}

document.addEventListener("change", (event) => {
  const form = event.target.closest("[data-compare-picker]");
  if (form) updateComparePicker(form);
});
document.addEventListener("DOMContentLoaded", updateAllComparePickers);
document.addEventListener("htmx:afterSettle", updateAllComparePickers);

// [data-copy="#id"]: copies that input's value (a new API token) to the clipboard and says so.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const input = document.querySelector(button.dataset.copy);
  if (!input) return;
  input.select();
  try {
    await navigator.clipboard.writeText(input.value);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Selected: press Ctrl+C";
  }
});
// [data-select-on-focus]: a read-only value selected whole when focused, ready to copy.
document.addEventListener("focusin", (event) => {
  if (event.target.matches("[data-select-on-focus]")) event.target.select();
});

// [data-search-box]: a search that sends itself as one types (its form's "input changed delay"
// trigger). Its change event, fired when the box loses focus, would send the same search again through
// the form's "change" trigger, for the other fields, and that answer could replace the rows under a
// click that took the focus away; the event stays in the box.
document.addEventListener(
  "change",
  (event) => {
    if (event.target.matches && event.target.matches("[data-search-box]")) event.stopPropagation();
  },
  true,
);

// [data-upload-progress]: a form posted by htmx shows how much of its files has been sent
// ([data-upload-bar], [data-upload-text]), then that the server is importing them.
document.addEventListener("htmx:xhr:progress", (event) => {
  const form = event.target.closest("[data-upload-progress]");
  if (!form || !event.detail.lengthComputable) return;
  const percent = Math.round((100 * event.detail.loaded) / event.detail.total);
  const bar = form.querySelector("[data-upload-bar]");
  const text = form.querySelector("[data-upload-text]");
  if (bar) bar.value = percent;
  if (text) text.textContent = percent < 100 ? `Uploading: ${percent}%` : "Uploaded; importing…";
});
document.addEventListener("htmx:afterRequest", (event) => {
  const form = event.target.closest("[data-upload-progress]");
  const text = form && form.querySelector("[data-upload-text]");
  if (!text) return;
  const status = event.detail.xhr ? event.detail.xhr.status : 0;
  if (status === 400) text.textContent = "Nothing imported: what to change is named below.";
  else text.textContent = event.detail.successful ? "Done: the report is below." : "The upload failed.";
});

// [data-swap-errors]: a form whose 400 answer carries the form again with each bad field named; htmx
// swaps only 2xx answers by default, so this one's 400 is swapped in too.
document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail.xhr.status === 400 && event.detail.requestConfig.elt.closest("[data-swap-errors]")) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});

// [data-keyboard-cards]: j and k move to the next and previous [data-card] (the stop queue, the runs
// list's rows), o opens
// the focused card's [data-card-link]; keys typed into a field are left alone.
function keyboardCards(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || event.target.closest("input, textarea, select")) return;
  const list = document.querySelector("[data-keyboard-cards]");
  if (!list || !["j", "k", "o"].includes(event.key)) return;
  const cards = [...list.querySelectorAll("[data-card]")];
  if (!cards.length) return;
  const at = cards.indexOf(document.activeElement.closest("[data-card]"));
  if (event.key === "o") {
    const link = at >= 0 && cards[at].querySelector("[data-card-link]");
    if (link) link.click();
    return;
  }
  const next = event.key === "j" ? Math.min(at + 1, cards.length - 1) : Math.max(at - 1, 0);
  cards[next].focus();
  cards[next].scrollIntoView({ block: "nearest" });
  event.preventDefault();
}
document.addEventListener("keydown", keyboardCards);

// "/" puts the cursor in the page's [data-slash-focus] field (the runs list's search); typed into a
// field, it is left alone.
document.addEventListener("keydown", (event) => {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.closest("input, textarea, select, [contenteditable]")) return;
  const field = document.querySelector("[data-slash-focus]");
  if (!field) return;
  event.preventDefault();
  field.focus();
  field.select();
});

// A review saved on a card moves on: once its answer is swapped in, the next card has the focus (after a
// review of identical stops, once the list has refreshed without them: its first card), so j, k and o go
// on from there instead of from the top.
let reviewedCard = null;
document.addEventListener("runReviewed", (event) => {
  const card = event.target.closest("[data-keyboard-cards] [data-card]");
  reviewedCard = card ? { id: card.id, waitForList: false } : null;
});
document.addEventListener("stopsReviewed", () => {
  if (reviewedCard) reviewedCard.waitForList = true;
});
document.addEventListener("htmx:afterSettle", (event) => {
  if (!reviewedCard) return;
  const listSwapped = event.target.matches("[data-keyboard-cards]");
  if (reviewedCard.waitForList && !listSwapped) return;
  const cards = [...document.querySelectorAll("[data-keyboard-cards] [data-card]")];
  const at = cards.findIndex((card) => card.id === reviewedCard.id);
  const next = at < 0 ? cards[0] : cards[Math.min(at + 1, cards.length - 1)];
  reviewedCard = null;
  if (!next) return;
  next.focus();
  next.scrollIntoView({ block: "nearest" });
});

// .table-wrap: a table wider than its frame scrolls inside it, and [data-overflowing] makes the frame
// say so (app.css). Measured when the page loads, when a frame changes size and after each swap.
const overflowWatch = new ResizeObserver((entries) => entries.forEach((entry) => markOverflow(entry.target)));
function markOverflow(wrap) {
  wrap.toggleAttribute("data-overflowing", wrap.scrollWidth > wrap.clientWidth + 1);
}
function watchTableWraps() {
  document.querySelectorAll(".table-wrap").forEach((wrap) => {
    overflowWatch.observe(wrap);
    markOverflow(wrap);
  });
}
document.addEventListener("DOMContentLoaded", watchTableWraps);
document.addEventListener("htmx:afterSettle", watchTableWraps);

// #request-error (base.html): a fragment the server did not give (an error status, or no answer at
// all) is said in words, instead of a page that silently stays as it was; the next answer that
// comes clears it (a poll that works again).
function requestError(text) {
  const box = document.getElementById("request-error");
  if (!box) return;
  box.textContent = text;
  box.hidden = !text;
}
document.addEventListener("htmx:responseError", (event) => {
  const status = event.detail.xhr.status;
  requestError(
    status === 404
      ? "What this part of the page showed is no longer there (404): reload the page."
      : `The server could not answer (${status}), so this page was not updated: try again in a moment.`,
  );
});
document.addEventListener("htmx:sendError", () => {
  requestError("The server did not answer, so this page was not updated: is it running? Try again in a moment.");
});
document.addEventListener("htmx:afterRequest", (event) => {
  if (event.detail.successful) requestError("");
});

// [data-follow] (a running run's page): while following, each step that arrives is scrolled into view;
// the button stops following (and starts it again), and so does scrolling up. It is hidden until this file shows it, and it
// comes back with each swap of the run's status, so its state lives here.
// Steps a gap of the timeline loads are older ones, not arrivals: only a new newest step is followed.
let followingSteps = true;
function newestStep() {
  const steps = document.querySelectorAll("#step-list > li.step");
  return steps[steps.length - 1];
}
let stepsSeen = newestStep()?.id;
function showFollow() {
  document.querySelectorAll("[data-follow]").forEach((button) => {
    button.hidden = false;
    button.setAttribute("aria-pressed", String(followingSteps));
    button.textContent = followingSteps ? "Stop following" : "Follow new steps";
  });
}
document.addEventListener("click", (event) => {
  if (!event.target.closest("[data-follow]")) return;
  followingSteps = !followingSteps;
  showFollow();
  if (followingSteps) newestStep()?.scrollIntoView({ block: "end" });
});
document.addEventListener("DOMContentLoaded", () => {
  stepsSeen = newestStep()?.id;
  showFollow();
});
// Scrolling up (wheel or keys) to read an earlier step stops following, as the button does.
function stopFollowingOnScrollUp(event) {
  const up = event.type === "wheel" ? event.deltaY < 0 : ["ArrowUp", "PageUp", "Home"].includes(event.key);
  if (!up || !followingSteps || !document.querySelector("[data-follow]")) return;
  if (event.type === "keydown" && event.target.closest("input, textarea, select")) return;
  followingSteps = false;
  showFollow();
}
window.addEventListener("wheel", stopFollowingOnScrollUp, { passive: true });
window.addEventListener("keydown", stopFollowingOnScrollUp);
document.addEventListener("htmx:afterSettle", () => {
  showFollow();
  const newest = newestStep()?.id;
  const live = document.querySelector("[data-follow]"); // a finished run's page follows nothing
  if (newest !== stepsSeen && followingSteps && live) newestStep()?.scrollIntoView({ block: "end" });
  stepsSeen = newest;
});

// details[id] a person opened stay open when htmx swaps in a new copy of them (the transcript that
// arrives with a run's end, the waterfall's words as it redraws); those they closed stay closed.
let openDetails = [];
document.addEventListener("htmx:beforeSwap", () => {
  openDetails = [...document.querySelectorAll("details[open][id]")].map((details) => details.id);
});
function reopenDetails() {
  openDetails.forEach((id) => document.getElementById(id)?.setAttribute("open", ""));
}
document.addEventListener("htmx:afterSwap", reopenDetails);
document.addEventListener("htmx:afterSettle", reopenDetails);

// [data-step-gap] (a long run's timeline, windowed) and [data-row-gap] (compare's aligned steps): a
// link to a step the page does not show yet (#step-480, #sub-agents-480; #row-480, an aligned step)
// loads the window that holds it into its gap, then scrolls to it; one in a closed fold opens it.
function revealLinked(id) {
  const target = document.getElementById(id);
  const fold = target?.closest("details:not([open])");
  if (fold) fold.open = true;
  target?.scrollIntoView();
}
function showLinkedStep() {
  const match = /^#(step|sub-agents|row)-(\d+)$/.exec(location.hash);
  if (!match) return;
  const id = location.hash.slice(1);
  if (document.getElementById(id)) {
    if (match[1] === "row" || document.getElementById(id).closest("details:not([open])")) revealLinked(id);
    return;
  }
  const index = Number(match[2]);
  const gap = [...document.querySelectorAll(match[1] === "row" ? "[data-row-gap]" : "[data-step-gap]")].find(
    (g) => Number(g.dataset.first) <= index && index <= Number(g.dataset.last),
  );
  const link = gap?.querySelector("[hx-get]");
  if (!link || !window.htmx) return;
  htmx
    .ajax("GET", `${link.getAttribute("hx-get")}&at=${index}`, { target: gap, swap: "outerHTML" })
    .then(() => revealLinked(id));
}
document.addEventListener("DOMContentLoaded", showLinkedStep);
window.addEventListener("hashchange", showLinkedStep);

// [data-menu-toggle] (base.html): on a narrow screen (app.css) the navigation folds behind this button,
// which opens and closes it; .menu-ready says this file is here to open it, so without it the
// navigation stays in view.
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-menu-toggle]").forEach((button) => button.closest(".top")?.classList.add("menu-ready"));
});
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-menu-toggle]");
  if (!button) return;
  const open = button.closest(".top").classList.toggle("menu-open");
  button.setAttribute("aria-expanded", String(open));
});

// details[data-fold-narrow] (the runs list's filters): open on a wide screen, folded on a phone, its
// summary saying how many filters are set ([data-fold-count]).
const narrowScreen = window.matchMedia("(max-width: 640px)");
function filtersSet(form) {
  return [...form.elements].filter((el) => {
    if (!el.name || el.type === "hidden" || el.type === "submit" || el.tagName === "BUTTON") return false;
    return el.type === "checkbox" || el.type === "radio" ? el.checked : el.value !== "";
  }).length;
}
function foldFilters(initial) {
  document.querySelectorAll("details[data-fold-narrow]").forEach((fold) => {
    if (initial) fold.open = !narrowScreen.matches;
    const form = fold.querySelector("form");
    const count = fold.querySelector("[data-fold-count]");
    if (!form || !count) return;
    const set = filtersSet(form);
    count.textContent = set ? ` · ${set} set` : "";
  });
}
document.addEventListener("DOMContentLoaded", () => foldFilters(true));
document.addEventListener("change", (event) => {
  if (event.target.closest("details[data-fold-narrow]")) foldFilters(false);
});
narrowScreen.addEventListener("change", () => foldFilters(true));

// [data-typeahead] (the compare picker): a suggestion's button ([data-pick] side, [data-run] id) puts its
// run's id in that side's field and closes the suggestions; Escape closes them too.
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-pick]");
  const form = button?.closest("[data-typeahead]");
  if (!form) return;
  const input = form.querySelector(`input[name="${button.dataset.pick}"]`);
  input.value = button.dataset.run;
  button.closest(".suggestions").hidden = true;
  input.focus();
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || !event.target.closest("[data-typeahead]")) return;
  event.target.closest(".typeahead")?.querySelector(".suggestions")?.setAttribute("hidden", "");
});
document.addEventListener("focusout", (event) => {
  const typeahead = event.target.closest("[data-typeahead] .typeahead");
  if (typeahead && !typeahead.contains(event.relatedTarget)) typeahead.querySelector(".suggestions")?.setAttribute("hidden", "");
});
