// The review page: draws a session's evidence (GET <this page>/evidence, same signed query) and
// replays its pointer at the recorded timing. No framework and no third-party request: the page's
// Content-Security-Policy allows this script and the evidence request only.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const state = { evidence: null, start: 0, end: 0, now: 0, playing: false, speed: 1, last: 0 };

  function fail(message) {
    $("verdict").textContent = message;
  }

  async function load() {
    let response;
    try {
      response = await fetch(location.pathname + "/evidence" + location.search, {
        credentials: "omit",
        cache: "no-store",
        referrerPolicy: "no-referrer",
      });
    } catch (error) {
      fail("The evidence could not be loaded: " + error);
      return;
    }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      fail(body.error || "The evidence could not be loaded (" + response.status + ").");
      return;
    }
    state.evidence = body.data;
    const timeline = state.evidence.timeline;
    state.start = 0;
    state.end = Math.max(1, timeline.durationMs);
    state.now = state.end;
    render();
  }

  function render() {
    const e = state.evidence;
    const score = e.score;
    const verdict = $("verdict");
    if (score) {
      verdict.textContent = score.scoreBand + " · " + score.humanScorePercent.toFixed(1) + " / 100 · " + score.modelVersion;
      verdict.className = "band-" + score.scoreBand;
    } else {
      verdict.textContent = "Not scored yet";
    }
    const reasons = $("reasons");
    reasons.replaceChildren(...(score ? score.reasons : []).map((text) => item("li", text)));
    const env = e.environment;
    const tells = ["webdriver", "webdriverPatched", "automationGlobals", "automationStack", "softwareRenderer"]
      .filter((name) => env[name] === true);
    if (env.headlessUserAgent) tells.push("headlessUserAgent");
    $("environment").textContent = tells.length
      ? "Environment tells: " + tells.join(", ")
      : "No environment tells reported" + (env.embedVersion ? " (embed " + env.embedVersion + ")." : ".");
    features();
    keys();
    draw();
  }

  function item(tag, text, className) {
    const node = document.createElement(tag);
    node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function features() {
    const rows = state.evidence.features
      .filter((f) => f.value !== null || f.contribution !== 0)
      .sort((a, b) => Math.abs(b.contribution) - Math.abs(a.contribution));
    $("features").tBodies[0].replaceChildren(
      ...rows.map((f) => {
        const row = document.createElement("tr");
        const sign = f.contribution > 0 ? "pos" : f.contribution < 0 ? "neg" : "";
        row.append(
          item("td", f.name),
          item("td", f.value === null ? "unmeasured" : format(f.value), "num"),
          item("td", f.contribution === 0 ? "0" : (f.contribution > 0 ? "+" : "") + f.contribution.toFixed(2), "num " + sign),
          item("td", f.humanPercentile === null ? "–" : f.humanPercentile.toFixed(0), "num"),
        );
        return row;
      }),
    );
  }

  function format(value) {
    return Number.isInteger(value) ? String(value) : value.toFixed(Math.abs(value) < 10 ? 3 : 1);
  }

  function draw() {
    const canvas = $("path");
    const timeline = state.evidence.timeline;
    const size = window.telltalePaths.viewport(timeline);
    const scale = Math.min(2, 1280 / size.width);
    canvas.width = Math.round(size.width * scale);
    canvas.height = Math.round(size.height * scale);
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    window.telltalePaths.draw(ctx, timeline, scale, state.now, 2, 6);
    const at = position(state.now);
    if (at) {
      ctx.fillStyle = "#111";
      ctx.beginPath();
      ctx.arc(at[0] * scale, at[1] * scale, 5, 0, 2 * Math.PI);
      ctx.fill();
    }
    $("scrub").value = String(Math.round((1000 * state.now) / state.end));
    $("clock").textContent = (state.now / 1000).toFixed(1) + " s of " + (state.end / 1000).toFixed(1) + " s";
  }

  // Where the replay shows the pointer at time t: between the recorded points either side, at
  // constant speed (the paths were simplified so that this passes within 1 px of every move).
  function position(t) {
    let best = null;
    for (const stroke of state.evidence.timeline.pointer) {
      const points = stroke.points;
      if (!points.length || points[0][0] > t) continue;
      let lo = 0, hi = points.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (points[mid][0] <= t) lo = mid; else hi = mid - 1;
      }
      const a = points[lo], b = points[Math.min(lo + 1, points.length - 1)];
      const share = b[0] > a[0] ? Math.min(1, (t - a[0]) / (b[0] - a[0])) : 0;
      best = [a[1] + share * (b[1] - a[1]), a[2] + share * (b[2] - a[2])];
    }
    return best;
  }

  function keys() {
    const canvas = $("keys");
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const list = state.evidence.timeline.keys;
    const width = canvas.width, end = state.end;
    const classes = ["char", "digit", "space", "backspace", "enter", "tab", "arrow", "modifier"];
    for (const key of list) {
      const row = Math.max(0, classes.indexOf(key.class));
      const x = (key.t / end) * width;
      const w = Math.max(1, ((key.holdMs || 0) / end) * width);
      ctx.fillStyle = key.trusted === false ? "#c22" : key.class === "backspace" ? "#a86b00" : "#2a7de1";
      ctx.fillRect(x, 5 + (row % 4) * 20, w, 16);
    }
    const holds = list.map((k) => k.holdMs).filter((h) => h !== null);
    const gaps = list.slice(1).map((k, i) => k.t - list[i].t).filter((g) => g < 2000);
    const median = (v) => (v.length ? v.slice().sort((a, b) => a - b)[v.length >> 1] : null);
    $("keys-summary").textContent = list.length
      ? list.length + " key presses; median hold " + median(holds) + " ms, median interval " + median(gaps) + " ms."
      : "No key presses.";
  }

  function tick(now) {
    if (!state.playing) return;
    state.now = Math.min(state.end, state.now + (now - state.last) * state.speed);
    state.last = now;
    draw();
    if (state.now >= state.end) {
      stop();
      return;
    }
    requestAnimationFrame(tick);
  }

  function stop() {
    state.playing = false;
    $("play").textContent = "Play";
  }

  $("play").addEventListener("click", () => {
    if (!state.evidence) return;
    if (state.playing) {
      stop();
      return;
    }
    if (state.now >= state.end) state.now = 0;
    state.playing = true;
    state.last = performance.now();
    $("play").textContent = "Pause";
    requestAnimationFrame(tick);
  });
  $("speed").addEventListener("change", (event) => {
    state.speed = Number(event.target.value) || 1;
  });
  $("scrub").addEventListener("input", (event) => {
    if (!state.evidence) return;
    state.now = (Number(event.target.value) / 1000) * state.end;
    draw();
  });
  // The page's test reads the replay's state.
  window.telltaleReview = {
    state,
    position,
  };
  load();
})();
