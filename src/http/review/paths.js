// Pointer paths as the review page and the survey desk draw them: the strokes coloured by speed
// (blue slow, red fast), touch strokes dashed, presses as rings (red: a press a script
// dispatched). No framework; loaded before the page's own script.
"use strict";

window.telltalePaths = (function () {
  // Speed as colour: blue (slow) to red (fast), px/ms on a log scale.
  function speedColour(speed) {
    const share = Math.max(0, Math.min(1, Math.log10(1 + speed * 4) / Math.log10(17)));
    return "hsl(" + Math.round(220 - 220 * share) + " 80% 45%)";
  }

  // The page's viewport as the embed reported it, or else the extent of what was drawn.
  function viewport(timeline) {
    if (timeline.viewport) return timeline.viewport;
    let width = 1, height = 1;
    for (const stroke of timeline.pointer) for (const p of stroke.points) { width = Math.max(width, p[1]); height = Math.max(height, p[2]); }
    return { width: width + 20, height: height + 20 };
  }

  // Draws the strokes and presses of `timeline` up to time `now` (ms from its start) at `scale`.
  function draw(ctx, timeline, scale, now, lineWidth, ring) {
    ctx.lineWidth = lineWidth;
    ctx.lineCap = "round";
    for (const stroke of timeline.pointer) {
      const points = stroke.points;
      for (let i = 1; i < points.length && points[i][0] <= now; i++) {
        const [t0, x0, y0] = points[i - 1];
        const [t1, x1, y1] = points[i];
        ctx.strokeStyle = speedColour(Math.hypot(x1 - x0, y1 - y0) / Math.max(1, t1 - t0));
        ctx.setLineDash(stroke.pointerType === "touch" ? [4, 3] : []);
        ctx.beginPath();
        ctx.moveTo(x0 * scale, y0 * scale);
        ctx.lineTo(x1 * scale, y1 * scale);
        ctx.stroke();
      }
    }
    ctx.setLineDash([]);
    for (const press of timeline.presses) {
      if (press.t > now || press.x === null || press.y === null) continue;
      if (press.kind !== "down" && press.kind !== "touchstart") continue;
      ctx.strokeStyle = press.trusted === false ? "#c22" : "#555";
      ctx.beginPath();
      ctx.arc(press.x * scale, press.y * scale, ring, 0, 2 * Math.PI);
      ctx.stroke();
    }
  }

  return { speedColour, viewport, draw };
})();
