// The review page's keyboard: 1-9 choose a value of the score in focus (the first unanswered one otherwise), Tab moves
// between scores, Enter submits, s skips, p goes to your previous label, n to the next item. Keys typed into a text
// field are the text's own.
(function () {
  const form = document.getElementById("label-form");
  if (!form) return;
  const scores = Array.from(form.querySelectorAll("fieldset.score"));
  const current = () => {
    const focused = document.activeElement && document.activeElement.closest("fieldset.score");
    return focused || scores.find((s) => !s.querySelector("input:checked")) || scores[0];
  };
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const typing = event.target.matches("textarea, input[type=number], input[type=text]");
    if (event.key === "Enter" && event.target.matches("button, a")) return; // Enter on Skip or Previous is theirs
    if (event.key === "Enter" && !(typing && event.target.matches("textarea"))) {
      event.preventDefault();
      form.querySelector("#submit-label").click();
      return;
    }
    if (typing) return;
    if (/^[1-9]$/.test(event.key)) {
      const box = current();
      const choice = box && box.querySelector(`input[data-key="${event.key}"]`);
      if (choice) {
        event.preventDefault();
        choice.checked = true;
        choice.focus();
        const next = scores[scores.indexOf(box) + 1];
        const first = next && (next.querySelector("input:checked") || next.querySelector("input, textarea"));
        if (first) first.focus();
      }
      return;
    }
    const link = { s: "#skip", p: "#previous", n: "#next" }[event.key];
    const target = link && document.querySelector(link);
    if (target) {
      event.preventDefault();
      target.click();
    }
  });
})();
