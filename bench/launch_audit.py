"""Every InferenceX launch rule simulated on synthetic rows: what each script's deployment gives.

    python bench/launch_audit.py [--loads 1024/1024/4,8192/1024/64] [--tp 8] [--rounds 5]
        [--jobs 2] [--admission]

The launch table (``simulator/validation/inferencex.py``, ``LAUNCHES``) holds the settings of
scripts whose rows the H100 file mostly lacks (other GPUs, other model families), so nothing in
``kvplan validate`` exercises most of it. For every entry, every model of its family
(``FAMILY_MODELS``: the ids aiconfigurator's InferenceX adapter gives those rows) and every GPU
of the entry, this bench builds a synthetic row in the export's format (so the InferenceX
harness and that entry are what the row matches: rows a prior entry claims are left to it) at
each load of ``--loads`` (``isl/osl/users``) and simulates it as ``kvplan validate`` does
(``validate.simulate_row``, TP ``--tp``, ``--rounds`` requests per user), printing the predicted
mean TTFT and TPOT or the skip reason. ``--admission`` simulates the SGLang entries that run
without a radix cache a second time on SGLang's general admission path (``reserve_estimate``,
prefix cache on) beside the ignore-EOS path they take (``reserve_timeline``), and marks the rows
where the two differ.

What it catches: an entry that no longer matches its family's rows, a model the catalog lacks
(skipped with the reason), a deployment that does not fit, loads where a script's own memory
settings leave the engine capacity-bound (TTFT in seconds or more). What it cannot say: whether
the predictions are right; only the other GPUs' measurements can.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor

from hardware.catalog import shipped_catalog
from simulator.validation.inferencex import LAUNCHES, Launch, launch_for
from simulator.validation.silicon.rows import SiliconRow
from simulator.validation.validate import RowResult, simulate_row

#: Model ids and row precisions per InferenceX family (aiconfigurator 0.12.0's adapter,
#: ``sdk/config_adapter/inferencex.py`` ``MODEL_PATHS``, and the NVIDIA checkpoints it names).
FAMILY_MODELS: dict[str, tuple[tuple[str, str], ...]] = {
    "gptoss": (("openai/gpt-oss-120b", "fp4"),),
    "dsr1": (("deepseek-ai/DeepSeek-R1-0528", "fp8"), ("nvidia/DeepSeek-R1-0528-FP4", "fp4")),
    "70b": (("meta-llama/Llama-3.3-70B-Instruct", "fp8"),),
    "minimax": (("MiniMaxAI/MiniMax-M2.5", "fp8"),),
    "kimik2.5": (("moonshotai/Kimi-K2.5", "int4"), ("nvidia/Kimi-K2.5-NVFP4", "fp4")),
    "glm5": (("zai-org/GLM-5-FP8", "fp8"), ("nvidia/GLM-5-NVFP4", "nvfp4")),
    "glm5.x": (("zai-org/GLM-5.1-FP8", "fp8"),),
    "dsv4": (("deepseek-ai/DeepSeek-V4-Pro", "fp4"),),
    "qwen3.5": (
        ("Qwen/Qwen3.5-397B-A17B-FP8", "fp8"),
        ("nvidia/Qwen3.5-397B-A17B-NVFP4", "fp4"),
        ("Qwen/Qwen3.5-397B-A17B", "bf16"),
    ),
}
#: The export's source format: what makes a row InferenceX's (``rules.harness``).
_SOURCE = "source_file=2026-04-06.csv; model={model}; silicon_concurrency={users}"
#: SGLang's general admission path with its prefix cache: what the radix-off scripts replace.
_GENERAL_PATH = {"kv_admission": "reserve_estimate", "prefix_caching": True}

Case = tuple[str, str, str, str, int, int, int, int]
Outcome = tuple[float, float] | str


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", default="1024/1024/4,8192/1024/64", help="isl/osl/users,...")
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5, help="requests per user simulated")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--admission", action="store_true", help="also SGLang's general path where radix is off"
    )
    return parser.parse_args(argv)


def _row(case: Case) -> SiliconRow:
    backend, model, precision, gpu, tp, isl, osl, users = case
    return SiliconRow(
        line=2, id="audit", model=model, backend=backend, system=gpu, precision=precision,
        isl=isl, osl=osl, concurrency=users, tp=tp, pp=1, attention_dp=1, moe_tp=tp, moe_ep=1,
        measured_ttft_ms=1.0, measured_tpot_ms=1.0,
        source=_SOURCE.format(model=model.rsplit("/", 1)[-1], users=users),
    )  # fmt: skip


def cases(loads: list[tuple[int, int, int]], tp: int) -> list[tuple[Launch, Case]]:
    """Each entry's (model, GPU, load) cases that the entry itself matches (module doc)."""
    out: list[tuple[Launch, Case]] = []
    for launch in LAUNCHES:
        for model, precision in FAMILY_MODELS.get(launch.family, ()):
            for gpu in sorted(launch.gpus):
                for isl, osl, users in loads:
                    case = (launch.backend, model, precision, gpu, tp, isl, osl, users)
                    if launch_for(_row(case)) is launch:
                        out.append((launch, case))
    return out


def _simulate(job: tuple[Case, int, bool]) -> tuple[Outcome, Outcome | None]:
    """(as the launch rule deploys it, on SGLang's general path if asked)."""
    case, rounds, general = job
    catalog = shipped_catalog()  # cached per process
    runs = [None, _GENERAL_PATH] if general else [None]
    outcomes: list[Outcome] = []
    for overrides in runs:
        result = simulate_row(
            _row(case), latency_model="auto", catalog=catalog, rounds=rounds, overrides=overrides
        )
        if isinstance(result, RowResult):
            outcomes.append((result.predicted_ttft_ms, result.predicted_tpot_ms))
        else:
            outcomes.append(f"skipped: {result.reason}")
    return outcomes[0], outcomes[1] if general else None


def _show(outcome: Outcome) -> str:
    if isinstance(outcome, str):
        return outcome[:100]
    return f"TTFT {outcome[0]:9,.0f} ms  TPOT {outcome[1]:6.1f} ms"


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    try:
        loads = [tuple(int(x) for x in load.split("/")) for load in args.loads.split(",")]
    except ValueError:
        print(f"--loads {args.loads!r}: expected isl/osl/users[,...]", file=sys.stderr)
        return 2
    if any(len(load) != 3 or min(load) < 1 for load in loads):
        print(f"--loads {args.loads!r}: expected positive isl/osl/users", file=sys.stderr)
        return 2
    picked = cases([(a, b, c) for a, b, c in loads], args.tp)
    radix_off = {
        id(launch): launch.settings(_row(case)).get("kv_admission") == "reserve_timeline"
        for launch, case in picked
    }
    jobs = [
        (case, args.rounds, args.admission and radix_off[id(launch)]) for launch, case in picked
    ]
    print(f"{len(picked)} synthetic rows from {len(LAUNCHES)} launch entries, TP{args.tp}")
    skipped = changed = 0
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        for (_, case), (own, general) in zip(picked, pool.map(_simulate, jobs), strict=True):
            backend, model, precision, gpu, _, isl, osl, users = case
            label = f"{backend:6s} {model.rsplit('/', 1)[-1][:26]:26s} {precision:5s} {gpu:9s}"
            line = f"{label} {isl}/{osl} {users:4d} users  {_show(own)}"
            skipped += isinstance(own, str)
            if general is not None:
                differs = general != own
                changed += differs
                line += f"  | general path: {_show(general)}{'  <- differs' if differs else ''}"
            print(line)
    print(
        f"\n{skipped} skipped"
        + (f", {changed} differ on the general path" if args.admission else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
