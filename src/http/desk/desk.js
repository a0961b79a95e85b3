// The survey desk: a survey's scores at a glance (GET <this page>/summary, same signed query),
// its clusters with their members' paths drawn small side by side, and its sessions in a
// virtualised list (GET <this page>/sessions, a page of keyset at a time) whose rows open the
// session's review page in place. No framework and no third-party request: the page's
// Content-Security-Policy allows this script, the shared path drawing and its own requests.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const signed = new URLSearchParams(location.search);
  const base = location.pathname;
  const PAGE_ROWS = 500;
  // Members drawn per cluster before "Show all".
  const DRAWN = 24;
  const state = {
    summary: null,
    // The list as loaded so far under the current filters: rows, the next page's cursor,
    // whether the last page came, how many rows the filters select.
    rows: [],
    next: null,
    done: false,
    loading: null,
    total: 0,
    generation: 0,
    open: null,
  };

  function url(path, extra) {
    const query = new URLSearchParams(signed);
    for (const [name, value] of Object.entries(extra || {})) {
      if (value !== null && value !== undefined && value !== "") query.set(name, value);
    }
    return base + path + "?" + query.toString();
  }

  async function getJson(path, extra) {
    const response = await fetch(url(path, extra), { credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer" });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.error || "request failed (" + response.status + ")");
    return body;
  }

  function item(tag, text, className) {
    const node = document.createElement(tag);
    node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function rowHeight() {
    return window.matchMedia("(max-width: 800px)").matches ? 48 : 32;
  }

  async function load() {
    try {
      state.summary = (await getJson("/summary")).data;
    } catch (error) {
      $("status").textContent = "The survey could not be loaded: " + error.message;
      return;
    }
    render();
    await reload();
  }

  function render() {
    const s = state.summary;
    const run = s.latestRun;
    $("status").textContent =
      s.scored + " sessions scored, " + s.unscored + " captured and not scored yet" +
      (run ? " · latest run " + run.status + " (" + run.scored + " scored, " + run.skipped + " skipped, " + run.failed + " failed)" : " · no run yet");
    const bands = $("bands");
    bands.replaceChildren(
      ...["automation-like", "review", "human-like"].map((band) => {
        const li = document.createElement("li");
        li.className = "band-" + band;
        li.append(item("strong", String(s.bands[band])), document.createTextNode(band));
        return li;
      }),
    );
    histogram();
    clusters();
    const select = $("cluster");
    select.replaceChildren(
      item("option", "All"),
      ...s.clusters.map((c) => {
        const option = item("option", c.modality + " · " + c.size + " sessions · " + c.members[0].slice(0, 8));
        option.value = c.id;
        return option;
      }),
    );
    select.options[0].value = "";
  }

  function histogram() {
    const canvas = $("histogram");
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const bins = state.summary.histogram;
    const most = Math.max(1, ...bins.map((b) => b.sessions));
    const width = canvas.width / bins.length;
    ctx.font = "12px system-ui, sans-serif";
    bins.forEach((bin, i) => {
      const height = ((canvas.height - 34) * bin.sessions) / most;
      ctx.fillStyle = "hsl(" + Math.round((120 * (bin.from + 2.5)) / 100) + " 60% 42%)";
      ctx.fillRect(i * width + 2, canvas.height - 18 - height, width - 4, height);
      ctx.fillStyle = "#777";
      if (bin.sessions) ctx.fillText(String(bin.sessions), i * width + 4, canvas.height - 22 - height);
      if (i % 2 === 0) ctx.fillText(String(bin.from), i * width + 2, canvas.height - 4);
    });
  }

  function clusters() {
    const host = $("clusters");
    const list = state.summary.clusters;
    if (!list.length) {
      host.replaceChildren(item("p", "No cluster: no group of sessions behaved alike."));
      return;
    }
    host.replaceChildren(
      ...list.map((c) => {
        const box = document.createElement("article");
        box.className = "cluster";
        box.setAttribute("aria-label", "Cluster of " + c.size + " sessions");
        box.append(item("h3", c.size + " sessions alike in " + c.modality + " · within " + c.widestPercentile.toFixed(1) + " percentile points"));
        const table = document.createElement("table");
        const head = document.createElement("tr");
        head.append(item("th", "Feature"), item("th", "Median percentile"), item("th", "Spread (points)"));
        table.append(head);
        for (const f of c.features) {
          const row = document.createElement("tr");
          row.append(item("td", f.name), item("td", f.medianPercentile.toFixed(1)), item("td", f.rangePercentile.toFixed(1)));
          table.append(row);
        }
        const listButton = item("button", "List these sessions");
        listButton.type = "button";
        listButton.addEventListener("click", () => {
          $("cluster").value = c.id;
          $("band").value = "";
          reload();
          $("list").focus();
        });
        const members = document.createElement("div");
        members.className = "members";
        const drawMembers = (count) => {
          members.replaceChildren(...c.members.slice(0, count).map(member));
        };
        drawMembers(DRAWN);
        box.append(table, listButton);
        if (c.members.length > DRAWN) {
          const all = item("button", "Show all " + c.members.length);
          all.type = "button";
          all.addEventListener("click", () => {
            drawMembers(c.members.length);
            all.remove();
          });
          box.append(document.createTextNode(" "), all);
        }
        box.append(members);
        return box;
      }),
    );
  }

  // One member: its path drawn small, loaded when it scrolls into view.
  function member(reference) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "member";
    button.setAttribute("aria-label", "Open session " + reference);
    const canvas = document.createElement("canvas");
    canvas.width = 300;
    canvas.height = 190;
    button.append(canvas, item("span", reference));
    button.addEventListener("click", () => openReview(reference));
    observer.observe(canvas);
    canvas.dataset.reference = reference;
    return button;
  }

  // Paths load as they come near the view (a cluster of hundreds loads only what is seen).
  const observer = new IntersectionObserver(
    (entries) => {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        observer.unobserve(entry.target);
        drawMember(entry.target);
      }
    },
    { rootMargin: "200px" },
  );

  async function drawMember(canvas) {
    let evidence;
    try {
      evidence = (await getJson("/sessions/" + encodeURIComponent(canvas.dataset.reference) + "/evidence")).data;
    } catch (error) {
      canvas.setAttribute("aria-label", "Path not available: " + error.message);
      return;
    }
    const timeline = evidence.timeline;
    const size = window.telltalePaths.viewport(timeline);
    const scale = Math.min(canvas.width / size.width, canvas.height / size.height);
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    window.telltalePaths.draw(ctx, timeline, scale, Infinity, 1, 2);
    canvas.dataset.drawn = String(timeline.pointer.length);
  }

  function filters() {
    return { band: $("band").value, cluster: $("cluster").value, order: $("order").value };
  }

  // Starts the list again under the current filters.
  async function reload() {
    state.generation += 1;
    state.rows = [];
    state.next = null;
    state.done = false;
    state.loading = null;
    const f = filters();
    const s = state.summary;
    const cluster = s.clusters.find((c) => c.id === f.cluster);
    state.total = cluster ? cluster.size : f.band ? s.bands[f.band] : s.scored;
    $("csv").href = url("/sessions.csv", { band: f.band, cluster: f.cluster, order: f.order });
    $("spacer").style.height = state.total * rowHeight() + "px";
    $("list").scrollTop = 0;
    await more();
    paint();
  }

  // Loads the next page, once at a time.
  function more() {
    if (state.done) return Promise.resolve();
    if (state.loading) return state.loading;
    const generation = state.generation;
    state.loading = getJson("/sessions", Object.assign(filters(), { after: state.next, limit: PAGE_ROWS }))
      .then((page) => {
        if (generation !== state.generation) return;
        state.rows.push(...page.data);
        state.next = page.next || null;
        state.done = !page.next;
        if (state.done) {
          state.total = state.rows.length;
          $("spacer").style.height = state.total * rowHeight() + "px";
        }
      })
      .catch((error) => {
        $("count").textContent = "The list could not be loaded: " + error.message;
        state.done = true;
      })
      .finally(() => {
        if (generation === state.generation) state.loading = null;
      });
    return state.loading;
  }

  // Draws the rows in view (and a few either side); asks for more when the view nears the end
  // of what is loaded.
  function paint() {
    const list = $("list");
    const height = rowHeight();
    const first = Math.max(0, Math.floor(list.scrollTop / height) - 10);
    const last = Math.min(state.total, Math.ceil((list.scrollTop + list.clientHeight) / height) + 10);
    if (last > state.rows.length && !state.done) {
      more().then(paint);
    }
    const rows = [];
    for (let i = first; i < Math.min(last, state.rows.length); i++) rows.push(row(state.rows[i], i, height));
    list.replaceChildren($("spacer"), ...rows);
    $("count").textContent = state.total + " sessions" + (state.done ? "" : " (loading as you scroll)");
  }

  function row(session, index, height) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "row" + (state.open === session.reference ? " open" : "");
    button.setAttribute("role", "listitem");
    button.style.top = index * height + "px";
    button.dataset.reference = session.reference;
    button.append(
      item("span", session.reference),
      item("span", session.humanScorePercent.toFixed(1), "num"),
      item("span", session.scoreBand, "band-" + session.scoreBand),
      item("span", session.cluster ? session.cluster.split(":")[0] + " · " + session.cluster.split(":")[1].slice(0, 8) : "–"),
      item("span", String(session.eventCount), "num"),
      item("span", session.reasons[0] || ""),
    );
    button.title = session.reasons.join("\n");
    button.addEventListener("click", () => openReview(session.reference));
    return button;
  }

  // The session's review page in place, through a review link the desk asks for.
  async function openReview(reference) {
    let link;
    try {
      link = (await getJson("/sessions/" + encodeURIComponent(reference) + "/review-link")).data;
    } catch (error) {
      $("status").textContent = "The session could not be opened: " + error.message;
      return;
    }
    state.open = reference;
    $("review-reference").textContent = reference;
    $("review-frame").src = link.url;
    $("review").hidden = false;
    $("review").scrollIntoView({ block: "start" });
    $("close").focus();
    paint();
  }

  $("close").addEventListener("click", () => {
    $("review").hidden = true;
    $("review-frame").removeAttribute("src");
    state.open = null;
    paint();
  });
  for (const id of ["band", "cluster", "order"]) $(id).addEventListener("change", reload);
  let scheduled = false;
  $("list").addEventListener("scroll", () => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      paint();
    });
  });
  // The page's test reads the desk's state.
  window.telltaleDesk = { state, reload, openReview };
  load();
})();
