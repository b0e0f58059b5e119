// Lease countdowns: elements with data-expires (epoch ms) tick down once a second.
const skew = Date.now() - Number(document.body.dataset.now || Date.now());
function tick() {
  for (const el of document.querySelectorAll("[data-expires]")) {
    const left = (Number(el.dataset.expires) - (Date.now() - skew)) / 1000;
    el.textContent = left > 0 ? left.toFixed(0) + " s left" : "expired " + (-left).toFixed(0) + " s ago";
  }
}
tick(); setInterval(tick, 1000);
