// Opens a survey desk link in real headless Chromium, for tests/it/desk.rs. Prints one JSON
// object: the HTTP status of the page; when it loaded, the band counts it shows, each cluster's
// size and how many member paths it drew, the list's row count once scrolled to its end, what
// opening the first row showed (the review page in its frame), the CSV behind the download
// link, the requests that left the service and the policy violations.
//
// Environment: URL (the signed desk link), SHOT (optional: a PNG path for screenshots; a phone's
// goes beside it as -phone.png).
const { chromium } = require("playwright-core");

(async () => {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox"],
  });
  const result = {};
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const origin = new URL(process.env.URL).origin;
    const outside = [];
    page.on("request", (request) => {
      if (!request.url().startsWith(origin)) outside.push(request.url());
    });
    const violations = [];
    page.on("console", (message) => {
      if (/Content Security Policy|Refused to/.test(message.text())) violations.push(message.text());
    });
    const response = await page.goto(process.env.URL);
    result.status = response.status();
    result.headers = response.headers();
    if (result.status === 200) {
      await page.waitForFunction(
        () => window.telltaleDesk && window.telltaleDesk.state.summary && window.telltaleDesk.state.rows.length > 0,
        null,
        { timeout: 20000 },
      );
      result.bands = await page.$$eval("#bands li", (items) =>
        Object.fromEntries(items.map((li) => [li.className.replace("band-", ""), li.querySelector("strong").textContent])),
      );
      // Each cluster in view in turn, so that its members' paths load and are drawn.
      const boxes = await page.$$(".cluster");
      for (const box of boxes) {
        for (const canvas of await box.$$(".member canvas")) await canvas.scrollIntoViewIfNeeded();
        await page.waitForFunction(
          (element) => [...element.querySelectorAll(".member canvas")].every((c) => c.dataset.drawn !== undefined || c.getAttribute("aria-label")),
          box,
          { timeout: 20000 },
        );
      }
      result.clusters = await page.$$eval(".cluster", (list) =>
        list.map((box) => ({
          size: Number(box.querySelector("h3").textContent.split(" ")[0]),
          drawn: [...box.querySelectorAll(".member canvas")].filter((c) => Number(c.dataset.drawn) > 0).length,
        })),
      );
      // The list scrolled to its end holds every row.
      result.rows = await page.evaluate(async () => {
        const desk = window.telltaleDesk;
        const list = document.getElementById("list");
        for (let i = 0; i < 200 && !(desk.state.done && !desk.state.loading); i++) {
          list.scrollTop = list.scrollHeight;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        return desk.state.rows.length;
      });
      // The CSV behind the download link.
      result.csv = await page.evaluate(async () => (await fetch(document.getElementById("csv").href)).text());
      // Keyboard: the first Tab reaches a control of the page.
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.keyboard.press("Tab");
      result.focused = await page.evaluate(() => document.activeElement && (document.activeElement.id || document.activeElement.tagName));
      // The first row opened: the session's review page in place.
      await page.evaluate(() => {
        document.getElementById("list").scrollTop = 0;
      });
      await page.waitForSelector("#list .row");
      const reference = await page.$eval("#list .row", (row) => row.dataset.reference);
      await page.click("#list .row");
      await page.waitForFunction(() => !document.getElementById("review").hidden, null, { timeout: 20000 });
      let frame = null;
      for (let i = 0; i < 100 && !frame; i++) {
        frame = page.frames().find((f) => f.url().includes("/review/"));
        if (!frame) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await frame.waitForFunction(() => window.telltaleReview && window.telltaleReview.state.evidence, null, { timeout: 20000 });
      result.opened = {
        reference,
        frameReference: new URL(frame.url()).pathname.split("/")[3],
        verdict: await frame.textContent("#verdict"),
      };
      if (process.env.SHOT) {
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.screenshot({ path: process.env.SHOT, fullPage: true });
        await page.setViewportSize({ width: 390, height: 844 });
        await page.evaluate(() => window.telltaleDesk.reload());
        await page.screenshot({ path: process.env.SHOT.replace(/\.png$/, "-phone.png"), fullPage: false });
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
  process.stdout.write(JSON.stringify({ error: String((error && error.stack) || error) }) + "\n");
  process.exit(1);
});
