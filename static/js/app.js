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
