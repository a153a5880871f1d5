"""Table 1 at a contested setting over seeds, and the LoRA grid report on pretrained weights."""

from __future__ import annotations

import subprocess
import sys

from .test_studies import write_run

K = 500


def _gaps(jc: int) -> list[float]:
    """JC lower at the first ``jc`` iterations, the scheme S after: one switch."""
    return [1.0] * jc + [-1.0] * (K - jc)


def _sweep(tmp_path):
    sw = tmp_path / "k500"
    # seed 0: JC 100 of 500 (20%), one switch at k = 101: contested; the estimate always says S
    write_run(sw, "mlp-s0", lr=0.002, seed=0, gaps=_gaps(100), est=[-1.0] * K)
    # seed 1: JC 20 of 500 (4%): not contested; the estimate right everywhere
    write_run(sw, "mlp-s1", lr=0.002, seed=1, gaps=_gaps(20), est=_gaps(20))
    # seed 2: still running at k = 7, JC all along: left out of Table 1, its shares so far shown
    write_run(sw, "mlp-s2", lr=0.002, seed=2, gaps=[1.0] * 7, est=[1.0] * 7, status="running",
              iters=K)
    return sw


def _run(module, *args):
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_contest_seeds_report_counts_contested_seeds_and_the_baselines(tmp_path):
    out = tmp_path / "k500.md"
    proc = _run("crosscurv.experiments.studies.contest_seeds", _sweep(tmp_path), "--out", out)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    lines = text.splitlines()
    assert lines[2] == (
        "- mlp, eta = 0.002: 1 of 2 finished seeds contested at K = 500; JC lower in 60.0 "
        "iterations per seed [20, 100] (the paper: 45 of 500); Correct recursive 90.0%, "
        "cumulative 10.0%, majority 88.0%."  # cumulative = -estimate: 20% and 0%
    )
    assert lines[3] == "- Not finished, left out: mlp-s2 (K = 7 reached)."
    # the majority winner is S in both seeds: 400/500 and 480/500 right
    row = next(ln for ln in lines if "| Baseline: majority winner" in ln)
    assert "88.0% [80.0%, 96.0%]" in row and "0/60.0 (h 0, n 20-100)" in row
    rec = next(ln for ln in lines if "| Recursive" in ln)
    assert "90.0% [80.0%, 100.0%]" in rec and "| 100.0%" in rec  # the paper's DNN beside ours
    # seed 0 alone is contested: a second table over it, where the majority scores 80%
    at = lines.index("### mlp, eta = 0.002: the contested seeds only")
    only = next(ln for ln in lines[at:] if "| Baseline: majority winner" in ln)
    assert "| 1 (0) " in only and "| 80.0% " in only
    per_run = [ln for ln in lines if ln.startswith("| mlp")]
    assert [ln.split("|")[11].strip() for ln in per_run] == ["yes", "no", "not finished (no)"]
    assert per_run[2].split("|")[5].strip() == "100%"  # JC lower in all 7 so far
    # a sweep with no finished run yet: its runs so far, no Table 1
    only = tmp_path / "only"
    write_run(only, "fl-s0", task="fl", lr=0.005, seed=0, gaps=[1.0, -1.0] * 3, est=[1.0] * 6,
              status="running", iters=K)
    proc = _run("crosscurv.experiments.studies.contest_seeds", only, "--out", out)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "not finished (so far)" in text and "No finished run." in text
    assert "- fl, eta = 0.005: no finished seed yet." in text
    bad = _run("crosscurv.experiments.studies.contest_seeds", tmp_path / "none", "--out", out)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_contest_lora_report_names_the_base_weights(tmp_path):
    from crosscurv.experiments.studies.contest_lora import TASK

    rnd, pre = tmp_path / "random", tmp_path / "pretrained"
    write_run(rnd, "lora-a", task="lora", lr=0.003, seed=0, gaps=[-1.0] * 10, est=[-1.0] * 10)
    # balanced, two switches, inside the regime: contested so far
    write_run(pre, "lora-b", task=TASK, lr=0.03, seed=0, gaps=[1.0] * 4 + [-1.0] * 4 + [1.0] * 2,
              est=[1.0] * 10)
    # crosses eta * sharpness = 2 at k = 2: outside, whatever its switches
    write_run(pre, "lora-c", task=TASK, lr=0.3, seed=0, gaps=[1.0, -1.0] * 5, est=[1.0] * 10,
              sharp=[1.0, 10.0] + [1.0] * 8)
    out = tmp_path / "lora.md"
    proc = _run("crosscurv.experiments.studies.contest_lora", rnd, pre, "--out", out)
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[2] == (
        "- lora (pretrained T5): eta in {0.03, 0.3}, 2 runs, K = 10-10; 1 inside the regime, 1 "
        "with a change of winner there, 1 contested (most balanced: eta = 0.03, seed 0: JC 60%, "
        "GS 40%, 2 switches)."
    )
    assert lines[3] == (
        "- lora (random T5): eta in {0.003}, 1 runs, K = 10-10; 1 inside the regime, 0 with a "
        "change of winner there, 0 contested."
    )
    assert any(ln.startswith("| lora (pretrained T5) | 0.3 ") and "| no " in ln for ln in lines)


def test_contest_lora_quotes_the_lora_panel_and_says_why_not_the_others(tmp_path):
    from crosscurv.experiments.studies.contest_lora import OTHER_PANELS, figure1_lines

    (tmp_path / "motivation.md").write_text(
        "# Motivation\n\n- lora: the reversal in 2 of 3 seeds.\n- fl: not run.\n"
    )
    lines = figure1_lines(str(tmp_path))
    assert "- lora: the reversal in 2 of 3 seeds." in lines and "- fl: not run." not in lines
    assert OTHER_PANELS in lines
    missing = figure1_lines(str(tmp_path / "absent"))
    assert any("not written" in ln for ln in missing) and figure1_lines(None) == []


def test_paper_line_judges_the_papers_runs_by_the_same_rule():
    from crosscurv.experiments.studies.contest_seeds import paper_line

    line = paper_line()
    assert "DNN JC lower in 45 of 500 (9.0%: not contested; the majority winner would score " \
        "91.0%)" in line
    assert "LoRA JC lower in 75 of 500 (15.0%: contested" in line


def test_contest_lora_names_a_pattern_other_than_the_tasks(tmp_path):
    from crosscurv.experiments.studies.contest_lora import TASK, short_task

    assert short_task(TASK) == "lora (pretrained T5)"
    assert short_task(TASK, "gs:A,B") == "lora (pretrained T5, S = gs:A,B)"
    assert short_task("pkg:f", "chain") == "pkg:f (S = chain)"
    pre = tmp_path / "pretrained"
    # the task's order (B, then A): GS lower all along; A first: two switches, contested so far
    write_run(pre, "lora-ba", task=TASK, lr=0.03, seed=0, gaps=[-1.0] * 10, est=[-1.0] * 10)
    write_run(pre, "lora-ab", task=TASK, lr=0.03, seed=0, gaps=[1.0] * 4 + [-1.0] * 4 + [1.0] * 2,
              est=[1.0] * 10, pattern="gs:A,B")
    out = tmp_path / "lora.md"
    proc = _run("crosscurv.experiments.studies.contest_lora", pre, "--out", out)
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[2].startswith("- lora (pretrained T5): eta in {0.03}, 1 runs") and \
        lines[2].endswith("0 with a change of winner there, 0 contested.")
    assert lines[3].startswith("- lora (pretrained T5, S = gs:A,B): eta in {0.03}, 1 runs") and \
        "1 contested (most balanced: eta = 0.03, seed 0: JC 60%" in lines[3]
    rows = [ln for ln in lines if ln.startswith("| lora (pretrained T5")]
    assert [ln.split("|")[1].strip() for ln in rows] == [
        "lora (pretrained T5)", "lora (pretrained T5, S = gs:A,B)"]


def test_contest_seeds_puts_lora_on_the_pretrained_t5_beside_the_papers_lora(tmp_path):
    from crosscurv.experiments.studies.contest_lora import TASK

    sw = tmp_path / "lora"
    # JC lower at k = 101-200 only: 20%, two switches, contested; the estimate says S all along
    gaps = [-1.0] * 100 + [1.0] * 100 + [-1.0] * 300
    write_run(sw, "pre-s0", task=TASK, lr=0.03, seed=0, gaps=gaps, est=[-1.0] * K)
    write_run(sw, TASK.replace(":", "_") + "-default-lr0.03-seed1-K500", task=TASK, lr=0.03, seed=1,
              gaps=[-1.0] * 3, est=[-1.0] * 3, status="running", iters=K)
    out = tmp_path / "k500.md"
    proc = _run("crosscurv.experiments.studies.contest_seeds", sw, "--out", out)
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[2].startswith(
        "- lora, eta = 0.03: 1 of 1 finished seeds contested at K = 500; JC lower in 100.0 "
        "iterations per seed [100, 100] (the paper: 75 of 500); Correct recursive 80.0%")
    assert lines[3] == ("- Not finished, left out: lora-pretrained-default-lr0.03-seed1-K500 "
                        "(K = 3 reached).")
    assert any(ln.startswith("Tasks under the paper's name: `lora` is `" + TASK) for ln in lines)
    rec = next(ln for ln in lines if ln.startswith("| LoRA ") and "| Recursive" in ln)
    assert "| 80.0% " in rec and "| 99.6% " in rec  # ours beside the paper's LoRA


def test_contest_lora_quotes_the_rate_scans_when_given(tmp_path):
    from crosscurv.experiments.studies.contest_lora import (FL_PANEL, FL_SCALE, OTHER_PANELS,
                                                            figure1_lines)

    (tmp_path / "motivation.md").write_text("# M\n\n- lora: the reversal in 1 of 3 seeds.\n")
    scan = tmp_path / "scan.md"
    scan.write_text("# Figure 1's mlp panel over learning rates\n\n- mlp panel, 2 runs: a reversal"
                    " without divergence at eta = none.\n\nGenerated by `python -m scan --out x`;"
                    " do not edit.\n")
    lines = figure1_lines(str(tmp_path), [str(scan)])
    assert "- mlp panel, 2 runs: a reversal without divergence at eta = none." in lines
    assert any("(written by `python -m scan --out x`" in ln for ln in lines)
    assert FL_PANEL in lines and OTHER_PANELS not in lines and FL_SCALE not in lines
    fl = tmp_path / "fl.md"
    fl.write_text("# Figure 1's fl panel over learning rates\n\n- fl panel, 3 runs: a reversal "
                  "without divergence at eta = 0.01.\n\nGenerated by `python -m fl`; do not "
                  "edit.\n")
    both = figure1_lines(str(tmp_path), [str(scan), str(fl)])
    assert any(ln.startswith("The fl panel (FedAlt vs FedSim") for ln in both)
    assert "- fl panel, 3 runs: a reversal without divergence at eta = 0.01." in both
    assert FL_SCALE in both and FL_PANEL not in both
    lora = tmp_path / "lora.md"
    lora.write_text("# Figure 1's lora panel over learning rates\n\n- lora panel, 9 runs: x.\n\n"
                    "Generated by `python -m scan --panel lora --model /m`; do not edit.\n")
    assert any(ln.startswith("The lora panel (alternating vs simultaneous LoRA, Adam, on the T5 "
                             "weights of `--model`)") for ln in figure1_lines(str(tmp_path),
                                                                            [str(lora)]))
    missing = figure1_lines(str(tmp_path), [str(tmp_path / "absent.md")])
    assert any("not written (the rate scan did not run)" in ln for ln in missing)
