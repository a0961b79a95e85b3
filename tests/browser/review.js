// Opens a review link in real headless Chromium, for tests/it/review.rs. Prints one JSON object:
// the HTTP status of the page; when it loaded, the strokes the page drew, the reasons it shows,
// its response headers, and a replay timed against the wall clock.
//
// Environment: URL (the signed review link), SHOT (optional: a PNG path for a screenshot).
const { chromium } = require("playwright-core");

(async () => {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox"],
  });
  const result = {};
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const outside = [];
    page.on("request", (request) => {
      if (!request.url().startsWith(new URL(process.env.URL).origin)) outside.push(request.url());
    });
    const violations = [];
    page.on("console", (message) => {
      if (/Content Security Policy|Refused to/.test(message.text())) violations.push(message.text());
    });
    const response = await page.goto(process.env.URL);
    result.status = response.status();
    result.headers = response.headers();
    if (result.status === 200) {
      await page.waitForFunction(() => window.telltaleReview && window.telltaleReview.state.evidence, null, { timeout: 20000 });
      result.verdict = await page.textContent("#verdict");
      result.reasons = await page.$$eval("#reasons li", (items) => items.map((li) => li.textContent));
      result.strokes = await page.evaluate(() => window.telltaleReview.state.evidence.timeline.pointer);
      result.features = await page.$$eval("#features tbody tr", (rows) => rows.length);
      // The replay at 1x: how far the replay clock moved against the wall clock.
      result.replay = await page.evaluate(async () => {
        const review = window.telltaleReview;
        document.getElementById("scrub").value = "0";
        document.getElementById("scrub").dispatchEvent(new Event("input"));
        const began = performance.now();
        document.getElementById("play").click();
        await new Promise((resolve) => setTimeout(resolve, 1500));
        const wall = performance.now() - began;
        const replayed = review.state.now;
        document.getElementById("play").click();
        return { wallMs: wall, replayedMs: replayed, position: review.position(replayed) };
      });
      // Keyboard operable: Tab reaches the play button, and Space starts the replay.
      await page.keyboard.press("Tab");
      result.focused = await page.evaluate(() => document.activeElement && document.activeElement.id);
      if (process.env.SHOT) {
        await page.evaluate(() => {
          const review = window.telltaleReview;
          review.state.now = review.state.end;
          document.getElementById("scrub").dispatchEvent(new Event("input"));
          document.getElementById("scrub").value = "1000";
          document.getElementById("scrub").dispatchEvent(new Event("input"));
        });
        await page.screenshot({ path: process.env.SHOT, fullPage: true });
      }
    } else {
      result.body = await response.text();
    }
    result.outside = outside;
    result.violations = violations;
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(result) + "\n");
})().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }) + "\n");
  process.exit(1);
});
