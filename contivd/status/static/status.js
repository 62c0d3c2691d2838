// contivd status page. Every string from the cluster reaches the DOM as a text node or an
// attribute value set with setAttribute; nothing is ever parsed as HTML.
"use strict";

const PAGE_SIZE = 50;
const SVG_NS = "http://www.w3.org/2000/svg";
const state = { snapshot: null, revision: -1, fetching: false, again: false, filter: "", page: 0, haystack: [], matches: [], rendered: false, hits: null, hitsAt: 0, hitsFetching: false };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined && value !== false) node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function table(target, headers, rows) {
  const head = el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h))));
  const body = el("tbody", {}, rows);
  target.replaceChildren(head, body);
}

function badge(text, kind) {
  return el("span", { class: `badge ${kind}` }, text);
}

function health(value, reasons, label) {
  return el("span", { class: `health ${value}`, title: (reasons || []).join("; ") || value }, el("i"), label || value);
}

function ago(unix) {
  if (!unix) return "never";
  const seconds = Math.max(0, Date.now() / 1000 - unix);
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  return `${Math.floor(seconds / 3600)} h ago`;
}

function num(value) {
  return value === null || value === undefined ? "–" : Number(value).toLocaleString("en-US");
}

// ---- cluster --------------------------------------------------------------------------------

function renderSummary(snap) {
  const c = snap.cluster;
  const s = snap.store;
  const items = [
    ["leader", c.leader || "none"],
    ["term", num(c.term)],
    ["members", num(c.members.length)],
    ["networks", num(s.networks.length)],
    ["endpoints", num(s.endpoints.rows.length)],
    ["revision", num(snap.revision)],
  ];
  document.getElementById("summary").replaceChildren(
    ...items.map(([k, v]) => el("span", { class: k === "leader" && !c.leader ? "item bad" : "item" }, el("b", {}, k), v)),
  );
  document.getElementById("footer").replaceChildren(
    `served by ${c.self} · quorum ${c.hasQuorum ? "yes" : "NO"} · can commit ${c.canCommit ? "yes" : "NO"}`,
  );
}

function renderMembers(cluster) {
  const rows = cluster.members.map((m) =>
    el("tr", { class: m.leader ? "leader" : null },
      el("td", {}, el("span", { class: "name" }, m.name), m.leader ? badge("leader", "lead") : null, m.self ? badge("this node", "self") : null),
      el("td", {}, m.role),
      el("td", {}, health(m.health, m.reasons)),
      el("td", { class: "num" }, num(m.term)),
      el("td", { class: "num" }, num(m.commitIndex)),
      el("td", { class: "num" }, num(m.lastApplied)),
      el("td", {}, m.store),
      el("td", { class: "mono" }, m.raftAddress),
      el("td", { class: "mono" }, m.vtepIp),
    ),
  );
  table(document.getElementById("members"), ["node", "role", "health", "term", "commit", "applied", "store", "raft", "VTEP"], rows);
  const problems = cluster.members.filter((m) => m.reasons.length).map((m) => `${m.name}: ${m.reasons.join("; ")}`);
  const unreachable = cluster.unreachable.map(
    (u) => `${cluster.self} has no Raft link to ${u.name} (${u.raftAddress}) since ${new Date(u.since * 1000).toISOString().slice(0, 19)}Z, ${ago(u.since)}`,
  );
  const blocked = cluster.canCommit ? [] : [`${cluster.self} cannot commit: ${cluster.commitBlockers.join("; ")}`];
  document.getElementById("cluster-note").replaceChildren(
    ...blocked.map((p) => el("div", { class: "bad", id: "commit-blocked" }, p)),
    ...unreachable.map((p) => el("div", { class: "unreachable" }, p)),
    ...problems.map((p) => el("div", {}, p)),
  );
}

function renderDiagram(cluster, vlan) {
  const target = document.getElementById("diagram");
  const members = cluster.members.filter((m) => m.vtepIp || m.apiUrl);
  const width = 440, area = 230, height = vlan ? area + 50 : area, cx = width / 2, cy = area / 2;
  const rx = members.length > 1 ? width / 2 - 75 : 0, ry = members.length > 2 ? area / 2 - 35 : 0;
  target.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const pos = {};
  members.forEach((m, i) => {
    const angle = (members.length === 2 ? Math.PI : -Math.PI / 2) + (2 * Math.PI * i) / members.length;
    pos[m.name] = [cx + rx * Math.cos(angle), cy + ry * Math.sin(angle)];
  });
  const parts = [];
  for (const t of cluster.tunnels) {
    if (!pos[t.a] || !pos[t.b]) continue;
    const [x1, y1] = pos[t.a], [x2, y2] = pos[t.b];
    const line = svg("line", { x1, y1, x2, y2, class: `tunnel ${t.health}` });
    line.append(svg("title", {}, `VXLAN tunnel ${t.a} ⇄ ${t.b}: ${t.health}`));
    parts.push(line);
    parts.push(svg("text", { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4, class: "tunnel-label" }, "vxlan"));
  }
  if (vlan) {
    const uy = height - 30;
    for (const m of members) {
      const [x, y] = pos[m.name];
      parts.push(svg("line", { x1: x, y1: y, x2: x, y2: uy, class: `uplink ${m.health}` }));
    }
    parts.push(svg("rect", { x: 30, y: uy - 2, width: width - 60, height: 22, rx: 4, class: "switch" }));
    parts.push(svg("text", { x: cx, y: uy + 13, class: "switch-label" }, "VLAN uplinks (physical network)"));
  }
  for (const m of members) {
    const [x, y] = pos[m.name];
    const group = svg("g", { class: `node ${m.health}${m.leader ? " leader" : ""}`, transform: `translate(${x},${y})` });
    group.append(svg("title", {}, `${m.name} (${m.role}, ${m.health})${m.reasons.length ? ": " + m.reasons.join("; ") : ""}`));
    group.append(svg("rect", { x: -56, y: -22, width: 112, height: 44, rx: 8 }));
    group.append(svg("text", { y: -4, class: "node-name" }, m.name.length > 16 ? m.name.slice(0, 15) + "…" : m.name));
    group.append(svg("text", { y: 12, class: "node-sub" }, m.vtepIp || m.raftAddress));
    if (m.leader) group.append(svg("text", { x: 46, y: -26, class: "crown" }, "★"));
    parts.push(group);
  }
  target.replaceChildren(...parts);
  document.getElementById("legend").replaceChildren(
    ...["ok", "degraded", "unknown", "down"].map((h) => el("span", { class: `health ${h}` }, el("i"), h)),
    el("span", { class: "star" }, "★ leader"),
  );
}

function renderNodes(cluster) {
  const rows = cluster.members.map((m) => {
    const a = m.agent;
    if (!a) {
      const why = m.health === "unknown" || m.health === "down" ? "unknown" : "no datapath (control plane only)";
      return el("tr", {}, el("td", {}, el("span", { class: "name" }, m.name)), el("td", { colspan: 7, class: "muted" }, why));
    }
    const errors = [a.last_error, ...a.problems].filter(Boolean);
    return el("tr", {},
      el("td", {}, el("span", { class: "name" }, m.name)),
      el("td", {}, health(a.switch_connected ? "ok" : "down", [], a.switch_connected ? "connected" : "disconnected")),
      el("td", { class: "num" }, num(a.flows)),
      el("td", { class: "num" }, num(a.groups)),
      el("td", {}, a.first_sync_done ? ago(a.last_sync_unix) : "pending"),
      el("td", { class: "num" }, a.last_sync_seconds ? `${(a.last_sync_seconds * 1000).toFixed(1)} ms` : "–"),
      el("td", { class: "num" }, `${num(a.syncs)} / ${num(a.sync_failures)}`),
      el("td", { class: errors.length ? "errors" : "muted" }, errors.length ? errors.map((e) => el("div", {}, e)) : "none"),
    );
  });
  table(document.getElementById("nodes"), ["node", "OVS", "flows", "groups", "last reconcile", "took", "syncs / failed", "errors"], rows);
}

const BGP_STATES = { established: "ok", opensent: "degraded", active: "down", idle: "unknown" };

function renderBgp(cluster) {
  const peered = cluster.members.filter((m) => m.bgp);
  document.getElementById("bgp-box").hidden = !peered.length;
  const rows = peered.map((m) => {
    const b = m.bgp;
    return el("tr", {},
      el("td", {}, el("span", { class: "name" }, m.name)),
      el("td", { class: "mono" }, b.neighbor ? `${b.neighbor} AS ${b.neighborAs}` : "–"),
      el("td", { class: "num" }, b.localAs ?? "–"),
      el("td", {}, b.neighborStatus ? health(BGP_STATES[b.neighborStatus] || "unknown", [], b.neighborStatus) : "–"),
      el("td", {}, b.adminStatus || "–"),
      el("td", { class: "num" }, num(b.numRoutes)),
      el("td", { class: "mono routes" }, b.routes.length ? b.routes.map((r) => el("div", {}, r)) : el("span", { class: "muted" }, "none")),
      el("td", { class: b.error ? "errors" : "muted" }, b.error || "none"),
    );
  });
  table(document.getElementById("bgp"), ["node", "neighbor", "local AS", "neighbor status", "admin status", "routes", "learned routes", "error"], rows);
}

const KUBE_STATES = { watching: "ok", resuming: "degraded", listing: "degraded", backing_off: "down" };

function renderKube(cluster) {
  const watchers = cluster.members.filter((m) => m.kubernetes && (m.kubernetes.watching || Object.keys(m.kubernetes.problems).length));
  document.getElementById("kube-box").hidden = !watchers.length;
  const rows = watchers.flatMap((m) => {
    const k = m.kubernetes;
    const problems = Object.entries(k.problems).map(([what, why]) =>
      el("tr", {}, el("td", {}, el("span", { class: "name" }, m.name)), el("td", {}, what), el("td", {}, health("down", [], "cannot start")),
        el("td", { colspan: 3 }, "–"), el("td", { class: "errors" }, why)));
    return problems.concat(k.kinds.map((s) =>
      el("tr", {},
        el("td", {}, el("span", { class: "name" }, m.name)),
        el("td", {}, s.kind),
        el("td", { title: `since ${ago(s.since)}` }, health(s.ready ? "ok" : KUBE_STATES[s.state] || "unknown", [], s.state.replace("_", " "))),
        el("td", { class: "mono" }, s.resourceVersion || "–", s.versionAge !== null ? el("small", {}, ` ${s.versionAge} s old`) : null),
        el("td", { class: "num" }, num(s.relists)),
        el("td", {}, ago(s.since)),
        el("td", { class: s.lastError ? "errors" : "muted" }, s.lastError ? `${s.lastError} (${ago(s.errorSince)})` : "none"),
      )));
  });
  table(document.getElementById("kube"), ["node", "kind", "state", "resourceVersion", "relists", "state since", "last error"], rows);
}

// ---- networks and policy --------------------------------------------------------------------

function usageBar(allocated, total) {
  const pct = total ? (100 * allocated) / total : 0;
  const level = pct >= 90 ? "high" : pct >= 70 ? "mid" : "low";
  const fill = el("div", { class: `fill ${level}` });
  fill.style.width = `${Math.min(100, pct).toFixed(1)}%`;
  return el("div", { class: "usage", title: `${allocated} of ${total} addresses allocated` },
    el("div", { class: "bar" }, fill),
    el("span", { class: "num" }, `${num(allocated)} / ${num(total)}`, el("small", {}, ` ${pct.toFixed(pct < 10 && pct > 0 ? 1 : 0)}%`)),
  );
}

function renderNetworks(store) {
  const rows = store.networks.map((n) =>
    el("tr", {},
      el("td", {}, el("span", { class: "name" }, n.name)),
      el("td", { class: "mono" }, n.subnet),
      el("td", { class: "mono" }, n.gateway || "–"),
      el("td", {}, badge(`${n.encap} ${n.tag}`, n.encap)),
      el("td", { class: "usage-cell" }, usageBar(n.allocated, n.total)),
      el("td", { class: "num" }, num(n.endpoints)),
      el("td", {}, n.groups.length ? n.groups.map((g) => badge(g, "group")) : el("span", { class: "muted" }, "none")),
    ),
  );
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "no networks yet (contivd ctl net create …)")));
  table(document.getElementById("networks"), ["network", "subnet", "gateway", "tag", "addresses", "endpoints", "groups (EPGs)"], rows);
}

function renderServices(store) {
  const rows = store.services.map((s) =>
    el("tr", {},
      el("td", {}, badge(s.kind, s.kind === "kubernetes" ? "kube" : "group")),
      el("td", {}, s.name),
      el("td", {}, s.address),
      el("td", {}, s.ports.join(", ")),
      el("td", { class: "num" }, num(s.backends)),
    ));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no services")));
  table(document.getElementById("services"), ["kind", "service", "address", "ports", "backends"], rows);
}

function renderPolicy(store) {
  const target = document.getElementById("policy");
  if (!store.policy.length) {
    target.replaceChildren(el("p", { class: "muted" }, "No group has a policy attached: every group accepts all traffic (Contiv's default)."));
    return;
  }
  const groups = Object.fromEntries(store.groups.map((g) => [g.name, g]));
  target.replaceChildren(...store.policy.map((m) => {
    const g = groups[m.group];
    const head = el("tr", {}, el("th", {}, "from ↓ / service →"), m.services.map((s) => el("th", {}, s)));
    const rows = m.rows.map((r) =>
      el("tr", {},
        el("th", { class: `src ${r.kind}` }, r.source, r.source === m.group ? el("small", {}, " (itself)") : r.kind === "network" ? el("small", {}, " (network)") : null),
        r.cells.map(([action, rule]) => policyCell(action, rule)),
      ),
    );
    return el("div", { class: "matrix" },
      el("h3", {}, "to ", el("span", { class: "name" }, m.group), g ? el("small", {}, ` in ${g.network} · policies: ${g.policies.join(", ") || "none"}`) : null),
      el("table", { class: "policy" }, el("thead", {}, head), el("tbody", {}, rows)),
    );
  }));
}

// ---- policy hit counters ---------------------------------------------------------------------

const HITS_MS = 5000;  // at most one /policy/hits a page this often: each asks every node's agent for its flow statistics

// A matrix cell: the verdict, and the packets its deciding rule matched summed over the nodes
// (bytes in the tooltip); the default allow has no counter of its own.
function policyCell(action, rule) {
  const hit = rule && state.hits ? state.hits.compiled[rule] : null;
  const title = rule ? `${action} by ${rule}` : "no rule matches: allowed by default";
  return el("td", { class: `cell ${action}${rule ? "" : " default"}`, title: hit ? `${title} · ${num(hit.packets)} packets, ${num(hit.bytes)} bytes` : title },
    action === "allow" ? "✓" : "✕", hit ? el("small", { class: "hits" }, num(hit.packets)) : null);
}

function hitsTable(headers, rows) {
  const target = el("table", { class: "grid" });
  table(target, [...headers, "packets", "bytes"], rows.map((cells) => el("tr", {}, cells.map((c, i) => el("td", { class: i >= headers.length ? "num" : "mono" }, c)))));
  return target;
}

// NetworkPolicy's rules and every default drop (an isolated pod's), summed over the nodes, and the
// nodes whose counters are missing.
function renderHits() {
  const hits = state.hits;
  const target = document.getElementById("policy-hits");
  if (!hits) { target.replaceChildren(); return; }
  const parts = [];
  if (hits.error) parts.push(el("p", { class: "note" }, `counters unavailable: ${hits.error}`));
  if ((hits.unanswered || []).length) parts.push(el("p", { class: "note" }, `not counted: ${hits.unanswered.join(", ")} did not answer`));
  const netpol = Object.entries(hits.netpol || {});
  if (netpol.length) {
    parts.push(el("h3", {}, "NetworkPolicy rules"), hitsTable(["namespace/policy/rule"], netpol.map(([id, c]) => [id, num(c.packets), num(c.bytes)])));
  }
  const drops = hits.defaultDrops || [];
  if (drops.length) {
    parts.push(el("h3", {}, "Dropped by default ", el("small", {}, "no rule allowed it: the pod is isolated by NetworkPolicy (Contiv's groups allow by default)")),
      hitsTable(["namespace", "pod", "direction"], drops.map((d) => [d.tenant, d.group, d.direction, num(d.packets), num(d.bytes)])));
  }
  target.replaceChildren(...parts);
}

async function refreshHits(force) {
  if (state.hitsFetching || (!force && Date.now() - state.hitsAt < HITS_MS)) return;
  state.hitsFetching = true;
  state.hitsAt = Date.now();
  try {
    const answer = await fetch("/policy/hits", { cache: "no-store", headers: { accept: "application/json" } });
    const body = await answer.json();
    state.hits = answer.ok ? body : { ...(state.hits || {}), error: body.error || `HTTP ${answer.status}` };
  } catch (err) {
    state.hits = { ...(state.hits || {}), error: String(err.message || err) };
  } finally {
    state.hitsFetching = false;
  }
  if (state.snapshot) renderPolicy(state.snapshot.store);
  renderHits();
}

// ---- trace ----------------------------------------------------------------------------------

// The endpoints offered by address (an address is one path segment; a pod's namespace/name or an
// endpoint id typed by hand works too, as with `contivd ctl trace`).
function renderTraceChoices(store) {
  const options = store.endpoints.rows.filter((row) => row[2]).slice(0, 2000)
    .map(([name, , ip, , node]) => el("option", { value: ip.split("/")[0], label: `${name} on ${node}` }));
  document.getElementById("trace-endpoints").replaceChildren(...options);
}

// One row per policy table in pipeline order (Contiv's `policy`, then NetworkPolicy's egress and
// ingress): the rule that judged the packet there, else what the model says happened there.
function traceRule(table, rule, reason) {
  if (!rule) return el("tr", {}, el("th", {}, table), el("td", { colspan: 5, class: "muted" }, (reason || "").replace(/^[a-z_]+: /, "")));
  return el("tr", {}, el("th", {}, table), el("td", {}, rule.kind), el("td", { class: "mono" }, rule.policy), el("td", { class: "mono" }, rule.rule),
    el("td", { class: `cell ${rule.action === "allow" ? "allow" : "deny"}` }, rule.action), el("td", {}, num(rule.priority)));
}

// One node's OVS half (ofproto/trace), or why there is none (skipped, unanswered, error).
function traceHalf(side, half) {
  if (!half) return null;
  const where = half.node ? ` on ${half.node}` : "";
  if (!half.verdict) return el("p", { class: "muted" }, `OVS${where} (${side}): ${half.skipped || half.unanswered || half.error || "not traced"}`);
  return el("p", {}, `OVS${where} (${side}, ${half.bridge}): `, badge(String(half.verdict).toUpperCase(), half.verdict === "allow" ? "ok" : "bad"),
    " datapath actions: ", el("span", { class: "mono" }, half.datapath_actions));
}

function renderTrace(answer) {
  const verdict = String(answer.verdict || "?");
  const reasons = answer.reasons || [];
  const parts = [
    el("p", {}, badge(verdict.toUpperCase(), verdict === "allow" ? "ok" : "bad"), " ",
      el("span", { class: "mono" }, `${answer.src} → ${answer.dst}`), answer.deciding ? el("small", {}, ` decided by ${answer.deciding}`) : null),
    el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, ["table", "kind", "policy", "rule", "action", "priority"].map((h) => el("th", {}, h)))),
      el("tbody", {}, traceRule("policy (Contiv)", answer.contiv, reasons[0]), traceRule("np_egress (source)", answer.egress, reasons[1]),
        traceRule("np_ingress (destination)", answer.ingress, reasons[2]))),
    traceHalf("source", answer.ovs),
    traceHalf("destination", answer.ovs_destination),
  ];
  if (answer.agree === false) {
    for (const what of answer.disagreements || ["the datapath and the model differ"]) parts.push(el("p", { class: "disagree" }, `DISAGREEMENT: ${what} (a bug)`));
  }
  document.getElementById("trace").replaceChildren(...parts.filter(Boolean));
}

async function trace(event) {
  event.preventDefault();
  const segment = (id) => document.getElementById(id).value.trim().split("/").filter(Boolean).map(encodeURIComponent).join("/");
  const protoPort = segment("trace-port");
  const path = `/kubernetes/trace/${segment("trace-src")}/${segment("trace-dst")}${protoPort ? `/${protoPort}` : ""}`;
  const target = document.getElementById("trace");
  target.replaceChildren(el("p", { class: "muted" }, "tracing…"));
  try {
    const answer = await fetch(path, { cache: "no-store", headers: { accept: "application/json" } });
    const body = await answer.json();
    if (!answer.ok) throw new Error(body.error || `HTTP ${answer.status}`);
    renderTrace(body);
  } catch (err) {
    target.replaceChildren(el("p", { class: "disagree" }, `trace failed: ${err.message || err}`));
  }
}

// ---- endpoints ------------------------------------------------------------------------------

// The datapath column comes from the cluster part (each node reports its own endpoints), so the
// filter's index is rebuilt when either part changes.
function datapathOf(row) {
  const datapath = (state.snapshot.cluster.datapath || {})[row[8]];
  return datapath || ["–", null];
}

function indexEndpoints(store) {
  state.haystack = store.endpoints.rows.map((row) => [...row, datapathOf(row)[0]].join("\u0001").toLowerCase());
  applyFilter();
}

function applyFilter() {
  const words = state.filter.toLowerCase().split(/\s+/).filter(Boolean);
  const hay = state.haystack;
  const matches = [];
  for (let i = 0; i < hay.length; i++) {
    if (words.every((w) => hay[i].includes(w))) matches.push(i);
  }
  state.matches = matches;
  const pages = Math.max(1, Math.ceil(matches.length / PAGE_SIZE));
  state.page = Math.min(state.page, pages - 1);
}

function renderEndpoints() {
  const store = state.snapshot.store;
  const rows = store.endpoints.rows;
  const start = state.page * PAGE_SIZE;
  const shown = state.matches.slice(start, start + PAGE_SIZE).map((i) => {
    const [name, container, ip, mac, node, network, group, labels] = rows[i];
    const [datapath, healthy] = datapathOf(rows[i]);
    return el("tr", {},
      el("td", { class: "name" }, name),
      el("td", {}, container),
      el("td", { class: "mono" }, ip),
      el("td", { class: "mono" }, mac),
      el("td", {}, node),
      el("td", { class: `datapath ${healthy === true ? "ok" : healthy === false ? "bad" : "muted"}` }, datapath),
      el("td", {}, network),
      el("td", {}, group),
      el("td", { class: "labels" }, labels),
    );
  });
  if (!shown.length) shown.push(el("tr", {}, el("td", { colspan: 9, class: "muted" }, rows.length ? "no endpoint matches the filter" : "no endpoints yet")));
  table(document.getElementById("endpoints"), ["name", "container", "IP", "MAC", "node", "datapath", "network", "group", "labels"], shown);
  const pages = Math.max(1, Math.ceil(state.matches.length / PAGE_SIZE));
  const pager = document.getElementById("ep-pager");
  const button = (label, page, disabled) => {
    const b = el("button", { type: "button", disabled: disabled ? "disabled" : null }, label);
    b.addEventListener("click", () => { state.page = page; renderEndpoints(); });
    return b;
  };
  pager.replaceChildren(
    button("«", 0, state.page === 0),
    button("‹", state.page - 1, state.page === 0),
    el("span", {}, `page ${state.page + 1} of ${pages}`),
    button("›", state.page + 1, state.page >= pages - 1),
    button("»", pages - 1, state.page >= pages - 1),
  );
  const filtered = state.matches.length !== rows.length ? `${num(state.matches.length)} of ` : "";
  document.getElementById("ep-count").textContent = `${filtered}${num(rows.length)}`;
}

// ---- data flow ------------------------------------------------------------------------------

function renderWrites(writes) {
  const rows = (writes || []).map((w) =>
    el("tr", {},
      el("td", { title: new Date(w.time * 1000).toISOString() }, ago(w.time)),
      el("td", {}, w.who),
      el("td", {}, `${w.method} ${w.route}`),
      el("td", {}, w.object),
      el("td", {}, badge(String(w.status), w.status < 300 ? "ok" : "bad")),
      el("td", {}, w.node),
    ));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "no writes recorded")));
  table(document.getElementById("writes"), ["when", "who", "request", "object", "status", "executed on"], rows);
}

function renderCluster(cluster) {
  state.snapshot.cluster = cluster;
  renderSummary(state.snapshot);
  renderMembers(cluster);
  renderDiagram(cluster, state.snapshot.store.vlanUplinks);
  renderNodes(cluster);
  renderBgp(cluster);
  renderKube(cluster);
  if (state.rendered) {  // datapath states changed: the endpoint table and its filter index follow
    indexEndpoints(state.snapshot.store);
    renderEndpoints();
  }
}

function render(snap) {
  state.snapshot = snap;
  state.revision = snap.revision;
  renderCluster(snap.cluster);
  renderNetworks(snap.store);
  renderPolicy(snap.store);
  renderServices(snap.store);
  renderWrites(snap.writes);
  indexEndpoints(snap.store);
  renderEndpoints();
  renderTraceChoices(snap.store);
  refreshHits(true);
  if (!state.rendered) {
    state.rendered = true;
    document.body.dataset.ready = "true";
  }
}

async function refresh() {
  if (state.fetching) { state.again = true; return; }
  state.fetching = true;
  try {
    do {
      state.again = false;
      const answer = await fetch("/status/api/snapshot", { cache: "no-store" });
      if (!answer.ok) throw new Error(`snapshot: HTTP ${answer.status}`);
      render(await answer.json());
    } while (state.again);
  } catch (err) {
    setLive(false, String(err.message || err));
  } finally {
    state.fetching = false;
  }
}

function setLive(on, text) {
  const live = document.getElementById("live");
  live.className = on ? "live on" : "live off";
  live.textContent = text;
}

function connect() {
  const events = new EventSource("/status/events");
  events.addEventListener("open", () => { setLive(true, "live"); if (state.rendered) refresh(); });
  events.addEventListener("error", () => setLive(false, "reconnecting…"));
  events.addEventListener("store", (e) => {
    if (JSON.parse(e.data).revision !== state.revision) refresh();
  });
  events.addEventListener("cluster", (e) => {
    if (state.snapshot) { renderCluster(JSON.parse(e.data)); refreshHits(false); }
  });
}

let searchTimer = 0;
document.getElementById("ep-search").addEventListener("input", (e) => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => {
    state.filter = e.target.value;
    state.page = 0;
    if (state.snapshot) { applyFilter(); renderEndpoints(); }
  }, 80);
});

document.getElementById("trace-form").addEventListener("submit", trace);

refresh();
connect();
