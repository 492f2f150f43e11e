"""The tables bench/cost_model_heldout.py prints: this checkout's model, the old revision's
beside it, and the settings each model could not represent."""

from __future__ import annotations

from bench._common import print_table

LANDSCAPE_TITLES = {
    "uncalibrated": "vTrain single node, uncalibrated (priors of gpu_a100)",
    "leave_one_model_out": "vTrain single node, held out by model size (fit on the other 7 "
                           "sizes)",
    "leave_one_group_out": "vTrain single node, held out by group (fit on the other 143 "
                           "groups)",
    "in_sample": "vTrain single node, IN-SAMPLE (fit on all 1,440 rows; not a held-out "
                 "number)"}


def oom_cell(s: dict) -> str:
    return " / ".join(f"{f['over_budget']} ({f['ruled_out_by_guard']})" for f in s["false_oom"])


def pct(x: float, sign: bool = False) -> str:
    return f"{100 * x:+.1f}" if sign else f"{100 * x:.1f}"


def print_landscape(title: str, table: dict[str, dict]) -> None:
    print(f"\n{title}")
    body = [[model, "" if s["params_b"] is None else f"{s['params_b']:.2f}", s["n"],
             pct(s["mape"]), pct(s["signed_mean"], True),
             f"{s['fastest_within_5pct']}/{s['groups']}", f"{s['spearman_median']:.2f}",
             oom_cell(s)] for model, s in table.items()]
    print_table(["model", "params B", "n", "step MAPE %", "signed %", "fastest <=5 %",
                 "Spearman (median)", "false OOM 40 / 80 GiB (guard)"], body)


PROTOCOL_TITLES = {
    "calibrated": "fit on vTrain's single-node runs only",
    "priors": "the profiles' priors, no fit"}


def protocol_rows(protocols: dict[str, dict]) -> list[list]:
    """One row per (model, column): overall and each source's step MAPE and signed error,
    false OOM and the ranking within groups."""
    body = []
    for who, p in protocols.items():
        for label, title in PROTOCOL_TITLES.items():
            s = p[label]
            r, f = s["ranking"], s["false_oom"]
            body.append([who, title, s["n"], pct(s["mape"]), pct(s["signed_mean"], True),
                         pct(s["max_abs"]), f"{f['over_budget']} ({f['ruled_out_by_guard']})",
                         f"{r['fastest_within_5pct']}/{r['groups']}",
                         ", ".join(f"{src} {pct(e['mape'])}"
                                   for src, e in s["step_by_source"].items())])
    return body


def print_protocol(protocols: dict[str, dict], extrapolations: dict[str, dict]) -> None:
    """The headline: calibrate small, plan big; then vTrain's hidden-size extrapolation."""
    print("\nCalibrate small, plan big: every multi-node published run predicted (targets: "
          "step MAPE <= 12 % calibrated, no source above 20 %, <= 20 % at the priors, "
          "false OOM 0, fastest within 5 % in >= 80 % of groups)")
    print_table(["model", "constants", "n", "step MAPE %", "signed %", "max %",
                 "false OOM (guard)", "fastest <=5 %", "MAPE % by source"],
                protocol_rows(protocols))
    body = []
    for who, e in extrapolations.items():
        for label, title in (("fit_small_test_big", "fit on hidden 1,024, held out"),
                             ("in_sample_big", "fit on hidden 2,048, IN-SAMPLE")):
            s = e[label]
            body.append([who, title, s["n"], pct(s["mape"]), pct(s["signed_mean"], True),
                         f"{s['fastest_within_5pct']}/{s['groups']}", oom_cell(s)])
    print("\nvTrain single node, hidden size 2,048 (target: step MAPE <= 10 % held out)")
    print_table(["model", "constants", "n", "step MAPE %", "signed %", "fastest <=5 %",
                 "false OOM 40 / 80 GiB (guard)"], body)


def print_new(result: dict) -> None:
    print_protocol({"new": result["protocol"]}, {"new": result["extrapolation"]})
    vt = result["vtrain"]
    for name, title in LANDSCAPE_TITLES.items():
        print_landscape(title, vt[name])
    for name in ("leave_one_model_out", "leave_one_group_out"):
        s = vt[name]["all"]
        print(f"{name}: step MAPE {100 * s['mape']:.1f} % (target <= 10 %); model's fastest "
              f"within 5 % in {s['fastest_within_5pct']}/{s['groups']} groups = "
              f"{100 * s['fastest_within_5pct'] / s['groups']:.0f} % (target >= 80 %); false "
              "OOM " + ", ".join(f"{f['over_budget']} at {f['budget_gib']:g} GiB"
                                 for f in s["false_oom"]) + " (target 0)")
    print("in-sample constants: " + ", ".join(f"{k} {v:.4g}"
                                              for k, v in vt["in_sample_constants"].items()))
    pub = result["published"]
    body = []
    for source, s in pub.items():
        if source == "all":
            continue
        u, h = s["uncalibrated"], s["held_out"]
        f = h["false_oom"]
        m = h["peak_memory"]
        body.append([source, h["n"], pct(u["mape"]), pct(h["mape"]), pct(h["signed_mean"], True),
                     f"{f['over_budget']} ({f['ruled_out_by_guard']}) of {h['n']} at "
                     + "/".join(f"{b:g}" for b in f["budget_gib"]) + " GiB",
                     "not published" if m is None else f"{m['n']} published: MAPE "
                     f"{pct(m['mape'])} %, {pct(m['signed_mean'], True)} %"])
    print("\nPublished points, held out by source (fit on the other sources)")
    print_table(["source", "n", "uncal. MAPE %", "held-out MAPE %", "signed %",
                 "false OOM (guard)", "peak memory"], body)
    a = pub["all"]
    print(f"all {a['n']} points: step MAPE uncalibrated {pct(a['uncalibrated_mape'])} %, "
          f"held out {pct(a['held_out_mape'])} %, false OOM {a['false_oom']}")
    if a["peak_memory"]:
        print_peaks(a, "peak memory of the step-time points that publish one, at the priors' "
                       "memory constants")
    if result["memory_checks"]["peak_memory"]:
        print_peaks(result["memory_checks"],
                    "memory-only points (scored on peak memory alone; each row's assumed "
                    "column says why), at the priors' memory constants")
    print_peaks(result["memory_held_out"],
                "every published peak, held out by source (memory constants fitted to the "
                "other sources' peaks)")


def print_peaks(a: dict, title: str) -> None:
    """Every published peak beside the held-out prediction, and their MAPE (per source
    when there are several); a memory-only point's step error, held out too, beside it;
    and the published OOMs with the guard's verdict."""
    m = a["peak_memory"]
    if m is None:  # runs of one's own (--runs) may publish no peak
        print(f"{title}: no published peak among these runs")
        return
    print(f"{title}: MAPE {pct(m['mape'])} % over {m['n']} points (target <= 10 %), "
          f"signed {pct(m['signed_mean'], True)} %")
    if len(a["by_source"]) > 1:
        print("  by source: " + ", ".join(f"{s} {pct(e['mape'])} % ({e['n']})"
                                          for s, e in a["by_source"].items()))
    steps = any(q.get("step_error") is not None for q in a["peak_points"])
    print_table(["source", "point", "published GiB", "predicted GiB", "error %"]
                + (["step held out %"] if steps else []),
                [[q["source"], q["name"], f"{q['published_gib']:.1f}",
                  f"{q['predicted_gib']:.1f}",
                  pct(q["predicted_gib"] / q["published_gib"] - 1, True)]
                 + ([pct(q["step_error"], True)] if steps else [])
                 for q in a["peak_points"]])
    ooms = a.get("out_of_memory") or []
    if ooms:
        caught = sum(q["ruled_out_by_guard"] for q in ooms)
        print(f"published OOMs ruled out by the guard: {caught} of {len(ooms)}")
        print_table(["source", "point", "predicted GiB", "device GiB", "ruled out"],
                    [[q["source"], q["name"], f"{q['predicted_gib']:.1f}",
                      f"{q['budget_gib']:g}", "yes" if q["ruled_out_by_guard"] else "no"]
                     for q in ooms])


def print_side_by_side(new: dict, old: dict, commit: str) -> None:
    """Old and new on the same points and folds: per model size and per source."""
    tag = commit[:7]
    print_protocol({f"old {tag}": old["protocol"], "new": new["protocol"]},
                   {f"old {tag}": old["extrapolation"], "new": new["extrapolation"]})
    for name, title in LANDSCAPE_TITLES.items():
        body = []
        for model, n in new["vtrain"][name].items():
            o = old["vtrain"][name][model]
            body.append([model, n["n"], pct(o["mape"]), pct(n["mape"]),
                         pct(o["signed_mean"], True), pct(n["signed_mean"], True),
                         f"{o['fastest_within_5pct']}/{o['groups']}",
                         f"{n['fastest_within_5pct']}/{n['groups']}", oom_cell(o), oom_cell(n)])
        print(f"\n{title}: old ({tag}) vs new")
        print_table(["model", "n", "MAPE % old", "new", "signed % old", "new",
                     "fastest <=5 % old", "new", "false OOM 40/80 old", "new"], body)
    body = []
    for source, n in new["published"].items():
        o = old["published"][source]
        if source == "all":
            body.append(["all", n["n"], pct(o["uncalibrated_mape"]),
                         pct(n["uncalibrated_mape"]), pct(o["held_out_mape"]),
                         pct(n["held_out_mape"]), "", "", o["false_oom"], n["false_oom"]])
            continue
        body.append([source, n["held_out"]["n"], pct(o["uncalibrated"]["mape"]),
                     pct(n["uncalibrated"]["mape"]), pct(o["held_out"]["mape"]),
                     pct(n["held_out"]["mape"]), pct(o["held_out"]["signed_mean"], True),
                     pct(n["held_out"]["signed_mean"], True),
                     o["held_out"]["false_oom"]["over_budget"],
                     n["held_out"]["false_oom"]["over_budget"]])
    print(f"\nPublished points by source: old ({tag}) vs new")
    print_table(["source", "n", "uncal. MAPE % old", "new", "held-out MAPE % old", "new",
                 "signed % old", "new", "false OOM old", "new"], body)
    for label, o, n in (
            ("peak memory where published", old["published"]["all"]["peak_memory"],
             new["published"]["all"]["peak_memory"]),
            ("memory-only points", old["memory_checks"]["peak_memory"],
             new["memory_checks"]["peak_memory"]),
            ("every published peak, held out by source with a memory fit",
             old["memory_held_out"]["peak_memory"], new["memory_held_out"]["peak_memory"])):
        if o and n:
            print(f"{label} ({n['n']} points): MAPE old {pct(o['mape'])} %, "
                  f"new {pct(n['mape'])} %")


def print_unrepresented(pubs: list[dict], offset: int, answers: dict[str, dict]) -> dict:
    """The settings each model dropped: those it dropped on every point once, then per
    published point the others; returned for the JSON."""
    everywhere = {label: set.intersection(*(set(u) for u in a["unrepresented"]))
                  for label, a in answers.items()}
    out: dict = {"every_point": {k: sorted(v) for k, v in everywhere.items()}}
    for label, lost in out["every_point"].items():
        if lost:
            print(f"\n{label} model, on every point, cannot represent: {'; '.join(lost)}")
    body = []
    for k, p in enumerate(pubs):
        lost = {label: [x for x in a["unrepresented"][offset + k] if x not in everywhere[label]]
                for label, a in answers.items()}
        if any(lost.values()):
            out[f"{p['source']}: {p['name']}"] = lost
            body.append([p["source"], p["name"], *("; ".join(v) or "-" for v in lost.values())])
    if body:
        print("\nSettings the model could not represent (dropped for that model)")
        print_table(["source", "point", *answers], body)
    return out
