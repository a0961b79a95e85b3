/*! Telltale embed v1. Captures behavioural signals (never answers, key values or field names)
 * and sends them in batches to the Telltale collector. Fails open: nothing here may break the
 * page, block input or throw into it. */
(function (global) {
  "use strict";
  if (global.Telltale && global.Telltale.version) return;

  var VERSION = "1.4.0";
  var MOVE_INTERVAL_MS = 16;      // coalesce pointer and touch moves to one per frame
  var FLUSH_INTERVAL_MS = 2000;   // send at least this often while events arrive
  var MAX_BATCH_EVENTS = 200;     // well under the collector's 1000 events per batch
  var MAX_BATCH_BYTES = 60000;    // under sendBeacon's 64 KiB budget and the 1 MiB body limit
  // What the embed keeps for a collector that refuses or does not answer: it retries with
  // back-off for as long as events are younger than MAX_EVENT_AGE_MS and the queue is under
  // MAX_QUEUE_BYTES; past either bound the oldest go, and the next batch reports how many.
  var MAX_QUEUE_BYTES = 1048576;
  var MAX_EVENT_AGE_MS = 30 * 60 * 1000;
  var MIN_BACKOFF_MS = 1000;
  var MAX_BACKOFF_MS = 60000;
  // The page's content is counted again at most this often after the page changes (questions
  // that appear without a page load).
  var CONTENT_RECOUNT_MS = 1000;

  var state = null;

  function now() { return Date.now(); }

  function keyClass(key) {
    if (typeof key !== "string") return "other";
    if (key.length === 1) {
      if (key === " ") return "space";
      return key >= "0" && key <= "9" ? "digit" : "char";
    }
    switch (key) {
      case "Backspace": return "backspace";
      case "Delete": return "delete";
      case "Enter": return "enter";
      case "Tab": return "tab";
      case "ArrowUp": case "ArrowDown": case "ArrowLeft": case "ArrowRight": return "arrow";
      case "Shift": case "Control": case "Alt": case "Meta": case "CapsLock": case "AltGraph":
        return "modifier";
      default: return "other";
    }
  }

  function targetKind(el) {
    try {
      for (var node = el; node && node.nodeType === 1; node = node.parentNode) {
        var tag = node.tagName;
        if (tag === "A") return "link";
        if (tag === "BUTTON") return "button";
        if (tag === "TEXTAREA") return "text";
        if (tag === "SELECT" || tag === "OPTION" || tag === "LABEL") return "choice";
        if (tag === "INPUT") {
          var type = (node.type || "text").toLowerCase();
          if (type === "radio" || type === "checkbox" || type === "range") return "choice";
          if (type === "submit" || type === "button" || type === "reset") return "button";
          return "text";
        }
        if (node.isContentEditable) return "text";
      }
    } catch (e) { /* fall through */ }
    return "other";
  }

  // Field identity is a per-page index in order of first use: never a name, id or value.
  var fieldIndexes = typeof WeakMap === "function" ? new WeakMap() : null;
  var nextField = 0;
  var lengths = typeof WeakMap === "function" ? new WeakMap() : null;

  function fieldIndex(el) {
    if (!fieldIndexes || !el || typeof el !== "object") return -1;
    if (!fieldIndexes.has(el)) fieldIndexes.set(el, nextField++);
    return fieldIndexes.get(el);
  }

  // Only the length of a field's content is read, to report how much an input added or removed.
  function valueLength(el) {
    try {
      if (el && typeof el.value === "string") return el.value.length;
      if (el && el.isContentEditable) return (el.textContent || "").length;
    } catch (e) { /* fall through */ }
    return 0;
  }

  function push(type, data, at) {
    if (!state || state.stopped) return;
    var text = JSON.stringify({ type: type, timestamp: at || now(), data: data || {} });
    state.queue.push({ text: text, at: now() });
    state.queueBytes += text.length;
    state.produced += 1;
    // Past the queue's byte bound the oldest events go: the bound on what waits for a collector
    // that does not answer.
    while (state.queueBytes > MAX_QUEUE_BYTES && state.queue.length > 1) drop(1);
    if (state.queue.length >= MAX_BATCH_EVENTS) flush(false);
    else schedule(FLUSH_INTERVAL_MS);
  }

  function drop(count) {
    for (var i = 0; i < count && state.queue.length; i++) {
      state.queueBytes -= state.queue.shift().text.length;
      state.dropped += 1;
    }
  }

  function schedule(delay) {
    if (!state.timer) state.timer = setTimeout(function () { state.timer = null; guarded(flush)(false); }, Math.max(0, delay));
  }

  // The next batch, taken off the queue (put back in order if it is not delivered). Events
  // that waited past MAX_EVENT_AGE_MS are dropped first; the count of everything dropped so far
  // rides at the head of the batch as a `dropped` event.
  function takeBatch() {
    queueDelivery();
    var old = 0;
    while (old < state.queue.length && now() - state.queue[old].at > MAX_EVENT_AGE_MS) old++;
    drop(old);
    var items = [];
    var texts = [];
    var reported = state.dropped;
    if (reported) texts.push(JSON.stringify({ type: "dropped", timestamp: now(), data: { events: reported } }));
    var bytes = 12 + (reported ? texts[0].length + 1 : 0);
    while (state.queue.length && items.length < MAX_BATCH_EVENTS) {
      var item = state.queue[0];
      if (items.length && bytes + item.text.length + 1 > MAX_BATCH_BYTES) break;
      items.push(item);
      texts.push(item.text);
      bytes += item.text.length + 1;
      state.queueBytes -= item.text.length;
      state.queue.shift();
    }
    return { items: items, reported: reported, body: '{"events":[' + texts.join(",") + "]}" };
  }

  // How input reached the page since the last report (counts only; embed 1.4): mouse presses
  // and those with no pressure (a mouse reports 0.5 while a button is down; input injected
  // without a force, 0), mouse moves and those carrying several coalesced samples. Queued at
  // the head just before a batch is taken, so a batch that is not delivered keeps it.
  function queueDelivery() {
    var d = state.delivery;
    if (!d.mousePresses && !d.sampledMoves) return;
    var text = JSON.stringify({ type: "delivery", timestamp: now(), data: d });
    state.queue.unshift({ text: text, at: now() });
    state.queueBytes += text.length;
    state.produced += 1;
    state.delivery = newDelivery();
  }

  function newDelivery() {
    return { mousePresses: 0, zeroPressurePresses: 0, sampledMoves: 0, multiSampleMoves: 0 };
  }

  function delivered(batch) {
    state.dropped -= batch.reported;
    state.accepted += batch.items.length;
  }

  // A batch that may still be delivered goes back to the head of the queue, in order.
  function requeue(batch) {
    for (var i = batch.items.length - 1; i >= 0; i--) {
      state.queue.unshift(batch.items[i]);
      state.queueBytes += batch.items[i].text.length;
    }
  }

  function stop() {
    if (!state) return;
    state.stopped = true;
    state.queue = [];
    state.queueBytes = 0;
    if (state.timer) clearTimeout(state.timer);
    for (var i = 0; i < state.listeners.length; i++) {
      var l = state.listeners[i];
      try { l[0].removeEventListener(l[1], l[2], l[3]); } catch (e) { /* ignore */ }
    }
    state.listeners = [];
    if (state.observer) { try { state.observer.disconnect(); } catch (e) { /* ignore */ } }
    if (state.contentTimer) clearTimeout(state.contentTimer);
  }

  function flush(unloading) {
    if (!state || state.stopped) return;
    if (state.timer) { clearTimeout(state.timer); state.timer = null; }
    if (!state.queue.length) return;
    if (unloading) { beacon(); return; }
    // One request at a time keeps batches in order; the answer schedules the next.
    if (state.inFlight) return;
    if (now() < state.retryAt) { schedule(state.retryAt - now()); return; }
    if (typeof fetch !== "function") return;
    var batch = takeBatch();
    state.inFlight = batch;
    fetch(state.url, {
      method: "POST",
      body: batch.body,
      headers: { "Content-Type": "text/plain" },
      keepalive: batch.body.length < 60000,
      credentials: "omit",
      mode: "cors"
    }).then(function (response) {
      state.inFlight = null;
      var status = response.status;
      if (status === 202) {
        // The session was deleted: stop collecting for it.
        return response.json().then(function (result) {
          if (result && result.deleted) stop();
        }, function () { /* ignore */ });
      }
      if (response.ok) {
        delivered(batch);
        state.failures = 0;
        state.retryAt = 0;
        if (state.queue.length >= MAX_BATCH_EVENTS) flush(false);
        else if (state.queue.length) schedule(FLUSH_INTERVAL_MS);
      } else if (status === 408 || status === 429 || status >= 500) {
        requeue(batch);
        backOff(retryAfterMs(response));
      } else if (status === 403 || status === 404 || status === 410) {
        stop(); // no such survey: nothing here can ever be delivered
      } else {
        // Refused for what it is (400, 413): sending it again cannot help.
        state.dropped += batch.items.length;
        if (state.queue.length) schedule(0);
      }
    }, function () {
      // Network error or CORS failure: the collector may not have seen it.
      state.inFlight = null;
      requeue(batch);
      backOff(0);
    }).then(null, function () { /* never throw into the page */ });
  }

  // The page is going away: what is still queued leaves by sendBeacon (fire and forget, so it
  // counts as delivered). A batch in flight is not sent again: it may already have arrived, and
  // the collector does not deduplicate.
  function beacon() {
    if (!navigator.sendBeacon) return;
    while (state.queue.length) {
      var batch = takeBatch();
      var queued = false;
      // A string body goes out as text/plain;charset=UTF-8: no CORS preflight.
      try { queued = navigator.sendBeacon(state.url, batch.body); } catch (e) { queued = false; }
      if (!queued) { requeue(batch); return; } // past the browser's keepalive budget
      delivered(batch);
    }
  }

  // Exponential back-off with jitter (half to all of 1 s doubled per consecutive failure, at
  // most 60 s), never sooner than the collector's Retry-After.
  function backOff(serverMs) {
    state.failures += 1;
    var ceiling = Math.min(MAX_BACKOFF_MS, MIN_BACKOFF_MS * Math.pow(2, state.failures - 1));
    var delay = Math.max(serverMs, ceiling * (0.5 + 0.5 * Math.random()));
    state.retryAt = now() + delay;
    schedule(delay);
  }

  // Retry-After as delay-seconds or an HTTP date, in ms (0 when absent), at most 10 minutes.
  function retryAfterMs(response) {
    var value = "";
    try { value = String(response.headers.get("Retry-After") || ""); } catch (e) { return 0; }
    var ms = /^\s*\d+\s*$/.test(value) ? 1000 * parseInt(value, 10) : Date.parse(value) - now();
    return ms > 0 ? Math.min(ms, 600000) : 0;
  }

  // Every handler runs inside try/catch: a bug here must never surface in the page.
  function guarded(fn) {
    return function () {
      try { return fn.apply(this, arguments); } catch (e) { return undefined; }
    };
  }

  function listen(target, type, handler) {
    var options = { capture: true, passive: true };
    var wrapped = guarded(handler);
    try {
      target.addEventListener(type, wrapped, options);
      state.listeners.push([target, type, wrapped, options]);
    } catch (e) { /* ignore */ }
  }

  function round(v) { return typeof v === "number" && isFinite(v) ? Math.round(v) : 0; }

  // Where a press landed on its target: the offset from the target's centre in units of its
  // half-width and half-height (-1 to 1 inside it), two decimals. The box's size and place are
  // not sent.
  function targetOffset(el, x, y) {
    try {
      var box = el && el.getBoundingClientRect && el.getBoundingClientRect();
      if (!box || !(box.width > 0) || !(box.height > 0) || typeof x !== "number" || typeof y !== "number") return null;
      var share = function (v, low, size) {
        var s = (v - (low + size / 2)) / (size / 2);
        return Math.round(Math.max(-9.99, Math.min(9.99, s)) * 100) / 100;
      };
      return { dx: share(x, box.left, box.width), dy: share(y, box.top, box.height) };
    } catch (e) { return null; }
  }

  function attach() {
    var lastMove = 0;
    var lastTouchMove = 0;
    listen(document, "pointermove", function (e) {
      if (e.pointerType === "mouse" && e.isTrusted && typeof e.getCoalescedEvents === "function") {
        state.delivery.sampledMoves += 1;
        if (e.getCoalescedEvents().length > 1) state.delivery.multiSampleMoves += 1;
      }
      var t = now();
      if (t - lastMove < MOVE_INTERVAL_MS) return;
      lastMove = t;
      push("pointermove", { x: round(e.clientX), y: round(e.clientY), pointerType: e.pointerType || "mouse", trusted: e.isTrusted });
    });
    var press = function (type) {
      return function (e) {
        checkStack(e);
        var data = { x: round(e.clientX), y: round(e.clientY), pointerType: e.pointerType || "mouse", trusted: e.isTrusted, button: e.button, target: targetKind(e.target) };
        var offset = type === "pointerdown" ? targetOffset(e.target, e.clientX, e.clientY) : null;
        if (offset) { data.dx = offset.dx; data.dy = offset.dy; }
        if (type === "pointerdown" && e.pointerType === "mouse" && e.isTrusted && typeof e.pressure === "number") {
          state.delivery.mousePresses += 1;
          if (e.pressure === 0) state.delivery.zeroPressurePresses += 1;
        }
        push(type, data);
      };
    };
    listen(document, "pointerdown", press("pointerdown"));
    listen(document, "pointerup", press("pointerup"));
    listen(document, "click", function (e) {
      checkStack(e);
      push("click", { x: round(e.clientX), y: round(e.clientY), pointerType: e.pointerType || "mouse", trusted: e.isTrusted, button: e.button, target: targetKind(e.target) });
    });
    var key = function (type) {
      return function (e) {
        checkStack(e);
        push(type, { keyClass: keyClass(e.key), trusted: e.isTrusted, repeat: !!e.repeat });
      };
    };
    listen(document, "keydown", key("keydown"));
    listen(document, "keyup", key("keyup"));
    listen(document, "focusin", function (e) {
      var el = e.target;
      if (lengths && el && typeof el === "object") lengths.set(el, valueLength(el));
      // A form control gained focus: its per-page index and kind, so that how a person moves
      // between fields (Tab or the pointer) can be told; never its name.
      var kind = targetKind(el);
      if (kind !== "other") push("fieldfocus", { field: fieldIndex(el), target: kind });
    });
    listen(document, "input", function (e) {
      checkStack(e);
      var el = e.target;
      var before = lengths && lengths.has(el) ? lengths.get(el) : 0;
      var after = valueLength(el);
      if (lengths && el && typeof el === "object") lengths.set(el, after);
      push("input", { inputType: e.inputType || "unknown", lengthDelta: after - before, field: fieldIndex(el) });
    });
    listen(document, "paste", function (e) {
      var length = 0;
      try { length = ((e.clipboardData && e.clipboardData.getData("text")) || "").length; } catch (x) { /* ignore */ }
      push("paste", { length: length });
    });
    listen(document, "copy", function () { push("copy", {}); });
    listen(document, "cut", function () { push("cut", {}); });
    var lastScroll = 0;
    listen(global, "scroll", function () {
      var t = now();
      if (t - lastScroll < MOVE_INTERVAL_MS) return;
      lastScroll = t;
      push("scroll", { x: round(global.scrollX), y: round(global.scrollY) });
    });
    listen(global, "wheel", function (e) {
      push("wheel", { dx: e.deltaX, dy: e.deltaY, deltaMode: e.deltaMode, trusted: e.isTrusted });
    });
    var touch = function (type, coalesce) {
      return function (e) {
        var t = now();
        if (coalesce) {
          if (t - lastTouchMove < MOVE_INTERVAL_MS) return;
          lastTouchMove = t;
        }
        var p = (e.changedTouches && e.changedTouches[0]) || {};
        // The contact's geometry where the browser gives it: force (0-1), radius (radiusX) and
        // the ellipse's width and height (CSS px); zero where it gives none.
        var data = { x: round(p.clientX), y: round(p.clientY), force: typeof p.force === "number" ? p.force : 0, radius: typeof p.radiusX === "number" ? p.radiusX : 0, width: round(2 * p.radiusX), height: round(2 * p.radiusY), trusted: e.isTrusted };
        var offset = type === "touchstart" ? targetOffset(p.target || e.target, p.clientX, p.clientY) : null;
        if (offset) { data.dx = offset.dx; data.dy = offset.dy; }
        push(type, data);
      };
    };
    listen(document, "touchstart", touch("touchstart", false));
    listen(document, "touchmove", touch("touchmove", true));
    listen(document, "touchend", touch("touchend", false));
    // The window gaining or losing focus (switching tabs or apps), not fields: a capturing
    // listener on the window also sees every element's focus.
    listen(global, "focus", function (e) { if (e.target === global) push("focus", {}); });
    listen(global, "blur", function (e) { if (e.target === global) push("blur", {}); });
    listen(document, "visibilitychange", function () {
      push("visibility", { state: document.visibilityState });
      if (document.visibilityState === "hidden") flush(true);
    });
    listen(global, "resize", function () {
      push("resize", { width: round(global.innerWidth), height: round(global.innerHeight) });
    });
    listen(document, "submit", function () { push("submit", {}); flush(false); });
    listen(global, "pagehide", function () { push("pagehide", {}); flush(true); });
  }

  // ---- The page's content: counts only, never the text (embed 1.4) ------------------------------

  // Words of visible text (runs of non-space characters outside scripts, styles and editable
  // fields) and visible form controls: what the page asks a respondent to read and answer.
  var SKIPPED = /^(SCRIPT|STYLE|NOSCRIPT|TEMPLATE|TEXTAREA)$/;
  function countContent() {
    var body = document.body;
    if (!body) return null;
    var words = 0;
    var shown = function (el) {
      return el.checkVisibility ? el.checkVisibility() : el.getClientRects().length > 0;
    };
    var walker = document.createTreeWalker(body, 4 /* text nodes */);
    for (var text = walker.nextNode(); text; text = walker.nextNode()) {
      var el = text.parentNode;
      var found = text.nodeValue.match(/\S+/g);
      if (found && el && !SKIPPED.test(el.tagName) && !el.isContentEditable && shown(el)) words += found.length;
    }
    var controls = 0;
    var list = document.querySelectorAll("input:not([type=hidden]),select,textarea,button");
    for (var i = 0; i < list.length; i++) if (shown(list[i])) controls += 1;
    return { words: words, controls: controls };
  }

  // A `page` event at start and whenever the counts change after the page's content does
  // (questions shown without a page load), counted at most once a CONTENT_RECOUNT_MS.
  function sendContent() {
    state.contentTimer = null;
    var counts = countContent();
    var last = state.content;
    if (!counts || (last && last.words === counts.words && last.controls === counts.controls)) return;
    state.content = counts;
    // Stamped when the content changed, not when it was counted: a page view starts then.
    push("page", counts, state.changedAt);
    state.changedAt = 0;
  }

  function watchContent() {
    if (typeof MutationObserver !== "function" || !document.body) return;
    state.observer = new MutationObserver(function () {
      if (state.stopped || state.contentTimer) return;
      state.changedAt = now();
      state.contentTimer = setTimeout(guarded(sendContent), CONTENT_RECOUNT_MS);
    });
    state.observer.observe(document.body, { childList: true, subtree: true, characterData: true, attributes: true, attributeFilter: ["hidden", "style", "class"] });
  }

  function sessionEvent(options) {
    var nav = global.navigator || {};
    var scr = global.screen || {};
    var loc = global.location || {};
    push("session", {
      sessionId: options.sessionId,
      interviewId: options.interviewId,
      embedVersion: VERSION,
      origin: loc.origin || "",
      path: loc.pathname || "",
      userAgent: nav.userAgent || "",
      languages: nav.languages ? Array.prototype.slice.call(nav.languages, 0, 5) : [],
      timezoneOffset: new Date().getTimezoneOffset(),
      screenWidth: round(scr.width),
      screenHeight: round(scr.height),
      viewportWidth: round(global.innerWidth),
      viewportHeight: round(global.innerHeight),
      devicePixelRatio: global.devicePixelRatio || 1,
      maxTouchPoints: nav.maxTouchPoints || 0,
      hardwareConcurrency: nav.hardwareConcurrency || 0,
      webdriver: nav.webdriver === true
    });
  }

  // ---- Environment tells: booleans only, never the strings they were read from ----------------

  // Frames that automation tools' page scripts leave in a call stack (Playwright's utility and
  // injected scripts, Puppeteer's evaluation scripts).
  var AUTOMATION_FRAMES = /UtilityScript|InjectedScript|__puppeteer_evaluation_script__|pptr:|__playwright/;
  // Globals that drivers and automation frameworks define in the page (ChromeDriver's cdc_
  // arrays, Selenium, PhantomJS, Nightmare, Playwright and Puppeteer bindings).
  var AUTOMATION_GLOBALS = /^(\$?cdc_|\$wdc_|__webdriver|__selenium|__fxdriver|__driver_|_Selenium_IDE|callPhantom$|_phantom$|__nightmare$|domAutomation|__playwright|__pw|__puppeteer)/;
  // WebGL renderers that draw on the CPU: what headless browsers and most server VMs report.
  var SOFTWARE_RENDERER = /swiftshader|llvmpipe|softpipe|software|mesa offscreen|basic render/i;

  function nativeFunction(fn) {
    try { return /\{\s*\[native code\]\s*\}\s*$/.test(Function.prototype.toString.call(fn)); } catch (e) { return false; }
  }

  // navigator.webdriver answered by a script instead of the browser: a stealth patch.
  function webdriverPatched() {
    var nav = global.navigator;
    if (!nav || typeof Navigator === "undefined") return false;
    if (Object.prototype.hasOwnProperty.call(nav, "webdriver")) return true;
    var descriptor = Object.getOwnPropertyDescriptor(Navigator.prototype, "webdriver");
    return !!(descriptor && descriptor.get && !nativeFunction(descriptor.get));
  }

  function automationGlobals() {
    var names = Object.getOwnPropertyNames(global).concat(Object.getOwnPropertyNames(document));
    for (var i = 0; i < names.length; i++) if (AUTOMATION_GLOBALS.test(names[i])) return true;
    return false;
  }

  // true, false, or null when the page has no WebGL (nothing to judge).
  function softwareRenderer() {
    var canvas = document.createElement("canvas");
    var gl = canvas.getContext("webgl") || canvas.getContext("experimental-webgl");
    if (!gl) return null;
    var info = gl.getExtension("WEBGL_debug_renderer_info");
    var renderer = String(gl.getParameter(info ? info.UNMASKED_RENDERER_WEBGL : gl.RENDERER) || "");
    var lose = gl.getExtension("WEBGL_lose_context");
    if (lose) lose.loseContext();
    return SOFTWARE_RENDERER.test(renderer);
  }

  function tell(fn) {
    try { return fn(); } catch (e) { return null; }
  }

  function sendEnvironment() {
    if (!state || state.stopped) return;
    push("environment", {
      webdriverPatched: tell(webdriverPatched),
      automationGlobals: tell(automationGlobals),
      softwareRenderer: tell(softwareRenderer),
      automationStack: state.automationStack
    });
  }

  // Script-dispatched (untrusted) input is checked for automation frames in its call stack; the
  // first sighting sends the environment again (the scorer keeps a tell seen once).
  function checkStack(e) {
    if (e.isTrusted !== false || state.automationStack) return;
    var stack = "";
    try { stack = String(new Error().stack || ""); } catch (x) { return; }
    if (AUTOMATION_FRAMES.test(stack)) {
      state.automationStack = true;
      sendEnvironment();
    }
  }

  var IDENTIFIER = /^[A-Za-z0-9._:-]{1,128}$/;

  /** Starts capture: {trackingKey, sessionId, interviewId, collectorApiUrl}. Returns false when
   * the options are unusable (the page is not affected either way). */
  function start(options) {
    try {
      if (state || !options) return false;
      var trackingKey = String(options.trackingKey || "");
      var sessionId = String(options.sessionId || options.interviewId || "");
      var base = String(options.collectorApiUrl || "").replace(/\/+$/, "");
      if (!/^[0-9a-fA-F]{24}$/.test(trackingKey) || !IDENTIFIER.test(sessionId) || !base) return false;
      state = {
        url: base + "/" + trackingKey + "/" + encodeURIComponent(sessionId),
        queue: [], queueBytes: 0, listeners: [], timer: null, inFlight: null, failures: 0, retryAt: 0,
        stopped: false, automationStack: false, produced: 0, accepted: 0, dropped: 0,
        delivery: newDelivery(), content: null, contentTimer: null, changedAt: 0, observer: null
      };
      sessionEvent({ sessionId: sessionId, interviewId: options.interviewId ? String(options.interviewId) : undefined });
      attach();
      // Off the page's start-up path: a WebGL context costs a few milliseconds.
      setTimeout(guarded(sendEnvironment), 0);
      // The content once the page has its first layout, then whenever it changes.
      var counted = guarded(function () { sendContent(); watchContent(); });
      if (document.readyState === "loading") listen(document, "DOMContentLoaded", counted);
      else setTimeout(counted, 0);
      return true;
    } catch (e) {
      return false;
    }
  }

  // Counts of this page's events: produced, accepted by the collector (sent by beacon counts as
  // accepted), dropped past the bounds, and waiting in the queue. No event content.
  function stats() {
    if (!state) return null;
    return { produced: state.produced, accepted: state.accepted, dropped: state.dropped, queued: state.queue.length };
  }

  global.Telltale = {
    version: VERSION, start: start, stop: guarded(stop), stats: guarded(stats),
    flush: guarded(function () { flush(false); })
  };

  // <script src=".../telltale.js" data-tracking-key data-session-id data-interview-id data-collector-api-url>
  try {
    var script = document.currentScript;
    if (script && script.getAttribute("data-tracking-key")) {
      start({
        trackingKey: script.getAttribute("data-tracking-key"),
        sessionId: script.getAttribute("data-session-id"),
        interviewId: script.getAttribute("data-interview-id"),
        collectorApiUrl: script.getAttribute("data-collector-api-url")
      });
    }
  } catch (e) { /* fail open */ }
})(typeof window !== "undefined" ? window : this);
