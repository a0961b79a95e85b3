/* The harness's probe: lets the replay runner ask this page where its controls are, which one has
 * the focus and whether the survey has ended, over plain requests to the page's own server (the
 * runner drives input through the operating system and never attaches DevTools). Idle unless the
 * page's URL carries `probe=<id>`; the embed never sees it (it records input, not requests). */
(function () {
  "use strict";
  var id = new URLSearchParams(location.search).get("probe");
  if (!id) return;
  // Where client coordinates sit on the screen, as the last trusted mouse event showed it.
  var offset = null;
  document.addEventListener("mousemove", function (e) {
    if (e.isTrusted) offset = { x: e.screenX - e.clientX, y: e.screenY - e.clientY };
  }, true);

  function frame() {
    var page = document.scrollingElement || document.documentElement;
    return {
      viewWidth: innerWidth, viewHeight: innerHeight, scrollY: page.scrollTop,
      scrollMax: page.scrollHeight - innerHeight,
      offset: offset || { x: screenX + (outerWidth - innerWidth), y: screenY + (outerHeight - innerHeight) },
      measured: !!offset
    };
  }

  function box(selector, label) {
    var element = document.querySelector(selector);
    if (!element) return null;
    var target = (label && element.closest("label")) || element;
    var b = target.getBoundingClientRect();
    if (!b.width || !b.height) return null;
    return { x: b.left, y: b.top, width: b.width, height: b.height };
  }

  // What the keyboard sees: whether `selector` (or its radio group) has the focus, whether it
  // comes after the focused element, and the control's state.
  function focus(selector) {
    var element = document.querySelector(selector);
    if (!element) return null;
    var active = document.activeElement;
    var radio = element.type === "radio";
    var shown = function (e) { return !!e && e !== document.body && e.getClientRects().length > 0; };
    var focused = active === element || (radio && !!active && active.type === "radio" && active.name === element.name);
    var forward = focused || !shown(active) || !!(active.compareDocumentPosition(element) & Node.DOCUMENT_POSITION_FOLLOWING);
    var group = radio ? Array.prototype.map.call(document.querySelectorAll('input[type=radio][name="' + element.name + '"]'), function (e) { return e.value; }) : null;
    return {
      focused: focused, forward: forward, group: group,
      activeValue: active ? active.value : null, activeChecked: !!(active && active.checked),
      checked: !!element.checked, value: element.type === "range" ? Number(element.value) : null
    };
  }

  // Words a person reads before answering: the question around `selector` (its fieldset or
  // grid row), or with `page` the shown section's headings and paragraphs. A count, never text.
  function words(selector, page) {
    var text = "";
    if (page) {
      var section = document.querySelector("section.current") || document.body;
      Array.prototype.forEach.call(section.querySelectorAll("h1, h2, p"), function (e) { text += " " + e.textContent; });
    } else {
      var element = document.querySelector(selector);
      var around = element && element.closest("fieldset, tr");
      text = around ? around.textContent : "";
    }
    return text.split(/\s+/).filter(function (w) { return w.length > 0; }).length;
  }

  function shown(selector) {
    var element = document.querySelector(selector);
    return !!element && element.getClientRects().length > 0;
  }

  function answer(query) {
    switch (query.kind) {
      case "box": return { box: box(query.selector, query.label), frame: frame() };
      case "focus": return focus(query.selector);
      case "shown": return shown(query.selector);
      case "words": return words(query.selector, query.page);
      case "frame": return frame();
      case "leave": setTimeout(function () { location.href = "about:blank"; }, 0); return true;
      default: return null;
    }
  }

  function loop() {
    fetch("/probe/" + id + "/next", { cache: "no-store" })
      .then(function (response) { return response.json(); })
      .then(function (query) {
        if (!query || query.kind === "none") return null;
        var result;
        try { result = { id: query.id, answer: answer(query) }; } catch (e) { result = { id: query.id, error: String(e) }; }
        return fetch("/probe/" + id + "/answer", { method: "POST", body: JSON.stringify(result), cache: "no-store" });
      })
      .then(loop, function () { setTimeout(loop, 200); });
  }
  loop();
})();
