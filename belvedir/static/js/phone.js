// What a narrow screen needs: the header's button opens and closes the navigation (CSS hides it below 760px until
// opened), and a table wider than the screen scrolls in its own box (CSS), reachable by keyboard as well.
document.addEventListener("click", (event) => {
  const button = event.target.closest(".menu-toggle");
  if (!button) return;
  const open = button.getAttribute("aria-expanded") !== "true";
  button.setAttribute("aria-expanded", String(open));
  button.closest(".topbar").classList.toggle("open", open);
});

function focusableWideTables(root) {
  for (const table of root.querySelectorAll("table")) {
    if (table.scrollWidth > table.clientWidth && !table.hasAttribute("tabindex")) {
      table.setAttribute("tabindex", "0");
    }
  }
}
focusableWideTables(document);
document.addEventListener("htmx:afterSettle", (event) => focusableWideTables(event.target));
window.addEventListener("resize", () => focusableWideTables(document));
