/* The harness pages' own survey logic (the demo page has its own): one section shown at a time,
 * `data-show` buttons move between them, submitting shows #done. Answers never leave the page. */
(function () {
  "use strict";
  var params = new URLSearchParams(location.search);
  window.telltaleDemoReference = params.get("response") || (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()));
  function show(id) {
    var sections = document.querySelectorAll("section");
    for (var i = 0; i < sections.length; i++) sections[i].classList.toggle("current", sections[i].id === id);
    window.scrollTo(0, 0);
  }
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("[data-show]");
    if (button) show(button.getAttribute("data-show"));
  });
  document.getElementById("survey").addEventListener("submit", function (e) { e.preventDefault(); show("done"); });
})();
