// Lease countdowns: elements with data-expires (epoch ms) tick down once a second.
const skew = Date.now() - Number(document.body.dataset.now || Date.now());
function tick() {
  for (const el of document.querySelectorAll("[data-expires]")) {
    const left = (Number(el.dataset.expires) - (Date.now() - skew)) / 1000;
    el.textContent = left > 0 ? left.toFixed(0) + " s left" : "expired " + (-left).toFixed(0) + " s ago";
  }
}
tick(); setInterval(tick, 1000);

// The overview's pause toggle: while pressed, htmx's polling requests of #live are cancelled
// (the trigger keeps firing; nothing is fetched or swapped). In a file, not inline: the CSP allows only 'self'.
const pause = document.getElementById("pause");
if (pause) {
  const note = document.getElementById("refresh-note");
  const running = note ? note.textContent : "";
  const toggle = () => {
    const paused = pause.getAttribute("aria-pressed") !== "true";
    pause.setAttribute("aria-pressed", String(paused));
    pause.textContent = paused ? "resume refresh" : "pause refresh";
    document.body.classList.toggle("paused", paused);
    if (note) note.textContent = paused ? "refresh paused" : running;
  };
  pause.addEventListener("click", toggle);
  if (location.hash === "#paused") toggle(); // a bookmark (or a test) can open the overview paused
  document.body.addEventListener("htmx:beforeRequest", (event) => {
    if (pause.getAttribute("aria-pressed") === "true" && event.detail.elt.id === "live") event.preventDefault();
  });
}
