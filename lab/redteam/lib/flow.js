'use strict';
// The survey as a respondent goes through it, written against a small set of primitives that
// each family implements with its own tool: think(ms), click(selector), type(selector, text),
// reveal(selector) (bring it into view the tool's way), setRange(selector, value), idle(ms).

const label = (name, value) => `label:has(> input[name="${name}"][value="${value}"])`;
const input = (name, value) => `input[name="${name}"][value="${value}"]`;

async function fillSurvey(p, r, ans, opts = {}) {
  const thinkScale = opts.thinkScale || 1;
  const think = (median, spread) => p.think(r.pause(median * thinkScale, spread));

  // Page 1: read the first question, pick a frequency, tick devices, next.
  await p.waitVisible('#page-1');
  await think(2200);
  // People click the words about as often as the little circle.
  await p.click(r.chance(0.5) ? label('often', ans.often) : input('often', ans.often));
  await think(1400);
  for (const device of ans.devices) {
    await p.click(r.chance(0.5) ? label('device', device) : input('device', device));
    await think(650);
  }
  if (p.idle && r.chance(0.3)) await p.idle(r.pause(900));
  await think(700);
  await p.click('#next-1');

  // Page 2: two text answers, a long block to scroll past, next.
  await p.waitVisible('#page-2');
  await think(1800);
  // Some tools' typing helpers click into the field themselves (typeClicksField).
  if (!p.typeClicksField) { await p.click('#experience'); await think(900); }
  await p.type('#experience', ans.experience);
  await think(1200);
  if (!p.typeClicksField) { await p.click('#colour'); await think(500); }
  await p.type('#colour', ans.colour);
  await think(800);
  await p.reveal('#next-2');
  await think(700);
  await p.click('#next-2');

  // Page 3: a 0-10 rating on a slider, submit.
  await p.waitVisible('#page-3');
  await think(1600);
  await p.setRange('#satisfaction', ans.satisfaction);
  await think(1000);
  await p.click('#submit');
  await p.waitVisible('#done');
}

module.exports = { fillSurvey, label, input };
