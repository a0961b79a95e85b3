'use strict';
// Pointer paths for the families that drive a mouse through their tool's move(x, y): a cubic
// Bezier (bezier-js) bent off the straight line, sampled on a minimum-jerk time profile, with a
// Fitts-law duration and an occasional overshoot and correction on long moves. This is the
// recipe bot builders publish around bezier-js (curve through two random control points,
// eased timing); the geometry comes from bezier-js, the timing from this file.
const { Bezier } = require('bezier-js');
const { sleep } = require('./common');

const minimumJerk = (t) => t * t * t * (10 - 15 * t + 6 * t * t);

function curvePoints(from, to, r, targetWidth) {
  const dx = to.x - from.x, dy = to.y - from.y;
  const d = Math.hypot(dx, dy);
  if (d < 2) return { points: [to], durationMs: 30 };
  const nx = -dy / d, ny = dx / d;
  const bend = Math.min(d * 0.25, 110) * r.uniform(0.15, 1) * (r.chance(0.5) ? 1 : -1);
  const c1 = { x: from.x + dx * r.uniform(0.15, 0.4) + nx * bend, y: from.y + dy * r.uniform(0.15, 0.4) + ny * bend };
  const c2 = { x: from.x + dx * r.uniform(0.6, 0.85) + nx * bend * r.uniform(0.2, 0.9), y: from.y + dy * r.uniform(0.6, 0.85) + ny * bend * r.uniform(0.2, 0.9) };
  const curve = new Bezier(from.x, from.y, c1.x, c1.y, c2.x, c2.y, to.x, to.y);
  const w = Math.max(8, targetWidth || 40);
  const durationMs = (170 + 125 * Math.log2(d / w + 1)) * r.uniform(0.8, 1.35);
  const steps = Math.max(4, Math.round(durationMs / r.uniform(14, 19)));
  const points = [];
  for (let i = 1; i <= steps; i++) {
    const p = curve.get(minimumJerk(i / steps));
    // A hand is not a plotter: a pixel or so of tremor, none on the last point.
    const j = i === steps ? 0 : r.normal(0, 0.6, -2, 2);
    points.push({ x: p.x + j, y: p.y + j * r.uniform(-1, 1) });
  }
  return { points, durationMs };
}

// Drives move(x, y) (the tool's own mouse move) along a human-like path from `from` to `to`.
async function humanMove(move, from, to, r, targetWidth) {
  const d = Math.hypot(to.x - from.x, to.y - from.y);
  const legs = [];
  if (d > 280 && r.chance(0.3)) {
    const over = r.uniform(0.03, 0.09);
    const past = { x: to.x + (to.x - from.x) * over + r.normal(0, 4), y: to.y + (to.y - from.y) * over + r.normal(0, 4) };
    legs.push([from, past, targetWidth], [past, to, targetWidth * 2]);
  } else {
    legs.push([from, to, targetWidth]);
  }
  for (const [a, b, w] of legs) {
    const { points, durationMs } = curvePoints(a, b, r, w);
    const start = Date.now();
    for (let i = 0; i < points.length; i++) {
      await move(Math.round(points[i].x * 100) / 100, Math.round(points[i].y * 100) / 100);
      const due = start + (durationMs * (i + 1)) / points.length;
      await sleep(due - Date.now());
    }
    if (legs.length > 1 && a === from) await sleep(r.uniform(60, 180));
  }
  return { x: to.x, y: to.y };
}

// A point inside a box, near its middle but not at it (people aim for the middle and miss).
function aimPoint(box, r) {
  const x = box.x + box.width * Math.min(0.85, Math.max(0.15, r.normal(0.5, 0.14)));
  const y = box.y + box.height * Math.min(0.8, Math.max(0.2, r.normal(0.5, 0.12)));
  return { x, y };
}

module.exports = { humanMove, aimPoint, curvePoints, minimumJerk };
