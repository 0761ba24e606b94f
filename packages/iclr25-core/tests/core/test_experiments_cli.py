"""Registry, CLI table and results.json, with an experiment registered by a fixture."""

import io
import json
import math
import random
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

from iclr25.core import cli, experiments
from iclr25.core.cards import CardError, parse_card
from iclr25.core.experiments import Experiment, ExperimentError, Measurement, Outcome, Registry
from iclr25.core.testing import run_quick_reproduction

CARD = {
    "slug": "fixture_paper",
    "title": "A Fixture Paper",
    "package": "iclr25-core",
    "module": "iclr25.core.fixture_paper",
    "status": "implemented",
    "summary": "Registered by the test suite only.",
    "claims": [
        {"id": "gain", "text": "ours beats the baseline", "metric": "acc, higher is better", "paper": 0.9},
        {"id": "speed", "text": "context figure", "metric": "s", "paper": "2x", "gated": False},
    ],
}


class Recorder:
    def __init__(self, ours=0.95, baseline=0.5):
        self.calls = []
        self.ours, self.baseline = ours, baseline

    def __call__(self, quick, device, seed, out):
        self.calls.append({"quick": quick, "device": device, "seed": seed, "out": out})
        (out / "plot.txt").write_text("a plot")
        return Outcome(
            claims={
                "gain": Measurement(
                    ours=torch.tensor(self.ours), baseline=self.baseline, holds=self.ours > self.baseline
                ),
                "speed": Measurement(ours=1.7),
            },
            extra={"steps": 3},
        )


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch):
    """A registry holding only what a test registers: installed papers' experiments stay out."""
    reg = Registry(use_entry_points=False)
    monkeypatch.setattr(experiments, "registry", reg)
    return reg


@pytest.fixture
def recorder(isolated_registry):
    rec = Recorder()
    isolated_registry.register(Experiment("fixture_paper", rec, card=parse_card(CARD)))
    return rec


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_reproduce_prints_table_and_writes_results(recorder, tmp_path):
    code, out, err = run_cli(
        "reproduce", "fixture_paper", "--quick", "--device", "cpu", "--seed", "5", "--out", str(tmp_path)
    )
    assert code == 0, err
    header = out.splitlines()[0].split()
    assert header == ["claim", "metric", "paper", "ours", "baseline", "holds?"]
    gain_row = next(line for line in out.splitlines() if line.startswith("gain"))
    assert gain_row.split()[-4:] == ["0.9", "0.95", "0.5", "yes"]
    assert "report" in next(line for line in out.splitlines() if line.startswith("speed"))
    assert recorder.calls == [{"quick": True, "device": torch.device("cpu"), "seed": 5, "out": tmp_path}]
    doc = json.loads((tmp_path / "results.json").read_text())
    assert set(doc) == {
        "slug",
        "title",
        "quick",
        "device",
        "seed",
        "seconds",
        "versions",
        "platform",
        "claims",
        "extra",
    }
    assert doc["platform"]["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert (doc["slug"], doc["title"], doc["quick"], doc["device"], doc["seed"]) == (
        "fixture_paper",
        "A Fixture Paper",
        True,
        "cpu",
        5,
    )
    assert doc["versions"]["torch"] == torch.__version__.split("+")[0] or doc["versions"]["torch"].startswith(
        torch.__version__[:4]
    )
    assert doc["claims"][0] == {
        "id": "gain",
        "text": "ours beats the baseline",
        "metric": "acc, higher is better",
        "paper": 0.9,
        "ours": pytest.approx(0.95),
        "baseline": 0.5,
        "holds": True,
    }
    assert doc["claims"][1]["holds"] is None and doc["extra"] == {"steps": 3}
    assert (tmp_path / "plot.txt").exists()


def test_claim_not_held_exits_1(recorder, tmp_path):
    recorder.ours = 0.1
    code, out, _ = run_cli("reproduce", "fixture_paper", "--device", "cpu", "--out", str(tmp_path))
    assert code == 1 and "NOT HELD" in out
    assert json.loads((tmp_path / "results.json").read_text())["claims"][0]["holds"] is False


def test_json_flag_prints_the_document(recorder, tmp_path):
    code, out, err = run_cli("reproduce", "fixture_paper", "--json", "--device", "cpu", "--out", str(tmp_path))
    assert code == 0
    assert json.loads(out) == json.loads((tmp_path / "results.json").read_text())
    assert "holds?" in err  # the table moves to stderr


def test_all_writes_one_folder_per_paper(recorder, tmp_path):
    code, out, _ = run_cli("reproduce", "--all", "--device", "cpu", "--out", str(tmp_path))
    assert code == 0
    assert (tmp_path / "fixture_paper" / "results.json").exists()
    assert out.splitlines()[0].split()[0] == "paper"


def test_unknown_slug_exits_2_naming_known_slugs(recorder, tmp_path):
    code, _, err = run_cli("reproduce", "nosuch", "--out", str(tmp_path))
    assert code == 2 and "nosuch" in err and "fixture_paper" in err
    assert recorder.calls == [] and not (tmp_path / "results.json").exists()


def test_bad_device_exits_2(recorder, tmp_path):
    code, _, err = run_cli("reproduce", "fixture_paper", "--device", "gpu0", "--out", str(tmp_path))
    assert code == 2 and "--device" in err and recorder.calls == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_without_cuda_exits_2(recorder, tmp_path):
    code, _, err = run_cli("reproduce", "fixture_paper", "--device", "cuda", "--out", str(tmp_path))
    assert code == 2 and "CUDA is not available" in err and recorder.calls == []


def test_unwritable_out_exits_2_before_work(recorder, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run_cli("reproduce", "fixture_paper", "--device", "cpu", "--out", str(blocker / "sub"))
    assert code == 2 and "--out" in err and recorder.calls == []


@pytest.mark.parametrize(
    "argv",
    [
        ["reproduce"],
        ["reproduce", "fixture_paper", "--all"],
        ["frobnicate"],
        ["reproduce", "fixture_paper", "--seed", "-1"],
        ["reproduce", "fixture_paper", "--seed", str(2**32)],
        ["reproduce", "fixture_paper", "--seed", "one"],
    ],
)
def test_usage_errors_exit_2(recorder, argv, tmp_path):
    code, _, err = run_cli(*argv, "--out", str(tmp_path)) if argv[0] == "reproduce" else run_cli(*argv)
    assert code == 2 and recorder.calls == [] and not (tmp_path / "results.json").exists()
    if "--seed" in argv and argv[-1] != "one":  # argparse reports "one" itself, on sys.stderr
        assert "--seed must be in [0, 2**32)" in err


def test_planned_paper_exits_2_before_work(recorder, monkeypatch, tmp_path):
    planned = parse_card(dict(CARD, slug="planned_paper", status="planned"))
    monkeypatch.setattr(cli, "discover_cards", lambda: {"fixture_paper": parse_card(CARD), "planned_paper": planned})
    code, _, err = run_cli("reproduce", "fixture_paper", "planned_paper", "--device", "cpu", "--out", str(tmp_path))
    assert code == 2 and "planned_paper: no reproduction yet (status: planned)" in err
    assert "reproducible: fixture_paper" in err and recorder.calls == [] and list(tmp_path.iterdir()) == []


def _random_run(quick, device, seed, out):
    draw = random.random() + float(np.random.rand()) + float(torch.rand(()))
    return Outcome(claims={"gain": Measurement(ours=draw, holds=True)})


def test_seed_makes_reproductions_repeatable(tmp_path):
    experiments.registry.register(Experiment("fixture_paper", _random_run, card=parse_card(CARD)))

    def ours(seed):
        random.random(), np.random.rand(), torch.rand(())  # move every global generator on
        argv = ["reproduce", "fixture_paper", "--json", "--device", "cpu", "--seed", seed, "--out", str(tmp_path)]
        code, out, err = run_cli(*argv)
        assert code == 0, err
        return json.loads(out)["claims"][0]["ours"]

    assert ours("7") == ours("7") != ours("8")


def test_json_output_is_the_file_for_numpy_and_nonfinite_values(tmp_path):
    def run(quick, device, seed, out):
        return Outcome(
            claims={"gain": Measurement(ours=np.float32(0.75), baseline=math.nan, holds=np.bool_(True).item())},
            extra={"loss": np.float32(0.5), "curve": torch.tensor([1.0, 2.0]), "diverged": math.inf},
        )

    experiments.registry.register(Experiment("fixture_paper", run, card=parse_card(CARD)))
    code, out, err = run_cli("reproduce", "fixture_paper", "--json", "--device", "cpu", "--out", str(tmp_path))
    assert code == 0, err
    text = (tmp_path / "results.json").read_text()
    assert json.loads(out) == json.loads(text)  # strict JSON both: NaN/inf as strings
    doc = json.loads(text)
    assert doc["extra"] == {"loss": 0.5, "curve": [1.0, 2.0], "diverged": "inf"}
    assert (doc["claims"][0]["ours"], doc["claims"][0]["baseline"]) == (0.75, "nan")


def test_unwritable_result_fails_that_paper_only(recorder, tmp_path):
    other = dict(CARD, slug="other_paper")
    bad = Outcome(claims={"gain": Measurement(1.0, holds=True)}, extra={"model": object()})
    experiments.registry.register(Experiment("other_paper", lambda **kw: bad, card=parse_card(other)))
    code, out, err = run_cli("reproduce", "--all", "--device", "cpu", "--out", str(tmp_path))
    assert code == 1 and "other_paper failed: TypeError" in err and "failed: other_paper" in out
    assert (tmp_path / "fixture_paper" / "results.json").exists()
    assert not (tmp_path / "other_paper" / "results.json").exists()
    assert "fixture_paper" in out.split("failed:")[0]  # the good paper's table is still printed


def test_malformed_card_exits_2(monkeypatch, tmp_path):
    def broken():
        raise CardError("x.toml: field 'status' must be ...")

    monkeypatch.setattr(cli, "discover_cards", broken)
    for argv in (["list"], ["info", "x"], ["reproduce", "x", "--out", str(tmp_path)]):
        code, _, err = run_cli(*argv)
        assert code == 2 and "malformed card" in err and "'status'" in err


def test_experiment_failure_is_reported_and_nothing_written(tmp_path):
    def boom(quick, device, seed, out):
        raise RuntimeError("diverged")

    experiments.registry.register(Experiment("fixture_paper", boom, card=parse_card(CARD)))
    code, _, err = run_cli("reproduce", "fixture_paper", "--device", "cpu", "--out", str(tmp_path))
    assert code == 1 and "diverged" in err and not (tmp_path / "results.json").exists()


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({"speed": Measurement(1.0)}, "gated claim 'gain' was not measured"),
        ({"gain": Measurement(1.0, holds=None)}, "needs holds=True/False"),
        ({"gain": Measurement(1.0, holds=True), "speed": Measurement(1.0, holds=True)}, "report-only"),
        ({"gain": Measurement(1.0, holds=True), "other": Measurement(1.0)}, "the card lacks"),
    ],
)
def test_results_must_fit_the_card(claims, message, tmp_path):
    exp = Experiment("fixture_paper", lambda **kw: Outcome(claims=claims), card=parse_card(CARD))
    with pytest.raises(ExperimentError, match=message):
        exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)


def test_full_run_only_claims_may_stay_undecided_in_quick_runs(tmp_path):
    card = dict(CARD, claims=[dict(CARD["claims"][0], quick=False), CARD["claims"][1]])
    exp = Experiment("fixture_paper", lambda **kw: Outcome(claims={}), card=parse_card(card))
    doc = exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    row = doc["claims"][0]
    assert row["holds"] is None and row["ours"] is None and "full runs only" in row["note"]
    with pytest.raises(ExperimentError, match="gated claim 'gain' was not measured"):
        exp.execute(quick=False, device="cpu", seed=0, out=tmp_path)
    decided = Experiment(
        "fixture_paper", lambda **kw: Outcome(claims={"gain": Measurement(1.0, holds=False)}), card=parse_card(card)
    )
    assert decided.execute(quick=True, device="cpu", seed=0, out=tmp_path)["claims"][0]["holds"] is False
    assert parse_card(card).claims[0].gated_in(quick=True) is False
    assert parse_card(card).claims[0].gated_in(quick=False) is True


@pytest.mark.parametrize(
    ("claim", "message"),
    [({"quick": "no"}, "'quick' must be true or false"), ({"gated": False, "quick": False}, "only applies to gated")],
)
def test_card_quick_field_is_checked(claim, message):
    card = dict(CARD, claims=[dict(CARD["claims"][0], **claim)])
    with pytest.raises(CardError, match=message):
        parse_card(card)


def test_registry_lists_without_loading_and_rejects_wrong_objects():
    reg = Registry(use_entry_points=False)
    assert reg.slugs() == []
    with pytest.raises(TypeError):
        reg.register("not an experiment")
    with pytest.raises(KeyError, match="no experiment registered"):
        reg.get("x")
    exp = reg.register(Experiment("fixture_paper", Recorder(), card=parse_card(CARD)))
    assert "fixture_paper" in reg and reg.get("fixture_paper") is exp and exp.title == "A Fixture Paper"
    with pytest.raises(ValueError, match="does not match"):
        Experiment("other", Recorder(), card=parse_card(CARD))


def test_experiment_checks_its_run(tmp_path):
    with pytest.raises(TypeError, match="run must be callable"):
        Experiment("fixture_paper", "not a function", card=parse_card(CARD))
    exp = Experiment("fixture_paper", lambda **kw: {"gain": 1.0}, card=parse_card(CARD))
    with pytest.raises(ExperimentError, match="must return an Outcome, got dict"):
        exp.execute(quick=True, device="cpu", seed=0, out=tmp_path)
    with pytest.raises(ExperimentError, match="has no installed card"):
        Experiment("no_such_paper_anywhere", Recorder()).card  # noqa: B018
    assert list(tmp_path.iterdir()) == []


def test_registry_finds_experiments_through_entry_points(monkeypatch):
    module = types.ModuleType("iclr25_fixture_experiments")
    module.experiment = Experiment("fixture_paper", Recorder(), card=parse_card(CARD))
    module.misnamed = Experiment("fixture_paper", Recorder(), card=parse_card(CARD))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    group = experiments.ENTRY_POINT_GROUP
    points = [
        experiments.metadata.EntryPoint("fixture_paper", f"{module.__name__}:experiment", group),
        experiments.metadata.EntryPoint("misnamed", f"{module.__name__}:misnamed", group),
        experiments.metadata.EntryPoint("not_an_experiment", f"{module.__name__}:__name__", group),
        experiments.metadata.EntryPoint("unimportable", "iclr25_no_such_module_anywhere:experiment", group),
    ]
    monkeypatch.setattr(
        experiments.metadata, "entry_points", lambda group=None: [p for p in points if p.group == group]
    )
    reg = Registry()
    # listing reads metadata only: the unimportable module is listed, not imported
    assert reg.slugs() == ["fixture_paper", "misnamed", "not_an_experiment", "unimportable"]
    assert reg.get("fixture_paper") is module.experiment and reg.get("fixture_paper") is module.experiment
    for slug in ("misnamed", "not_an_experiment"):
        with pytest.raises(ExperimentError, match=f"entry point {slug!r}.*must name an Experiment with slug {slug!r}"):
            reg.get(slug)
    with pytest.raises(ModuleNotFoundError):
        reg.get("unimportable")
    mine = reg.register(Experiment("fixture_paper", Recorder(), card=parse_card(CARD)))
    assert reg.get("fixture_paper") is mine  # an explicit registration shadows the entry point
    reg.unregister("fixture_paper")
    assert reg.get("fixture_paper") is module.experiment and "fixture_paper" in reg
    assert Registry(use_entry_points=False).slugs() == []


def test_run_quick_reproduction_checks_the_document(recorder, tmp_path):
    doc = run_quick_reproduction("fixture_paper", tmp_path, need_baseline=True)
    assert recorder.calls[0]["quick"] is True and recorder.calls[0]["seed"] == 0
    assert [row["id"] for row in doc["claims"]] == ["gain", "speed"]
    no_baseline = Outcome(claims={"gain": Measurement(ours=1.0, holds=True)})
    experiments.registry.register(Experiment("fixture_paper", lambda **kw: no_baseline, card=parse_card(CARD)))
    run_quick_reproduction("fixture_paper", tmp_path)
    with pytest.raises(AssertionError):
        run_quick_reproduction("fixture_paper", tmp_path, need_baseline=True)
    no_ours = Outcome(claims={"gain": Measurement(ours=None, holds=True)})
    experiments.registry.register(Experiment("fixture_paper", lambda **kw: no_ours, card=parse_card(CARD)))
    with pytest.raises(AssertionError):
        run_quick_reproduction("fixture_paper", tmp_path)
    with pytest.raises(AssertionError, match="not registered"):
        run_quick_reproduction("nosuch", tmp_path)


def test_console_command_exit_codes_and_light_list(tmp_path):
    """The real process: ``python -m iclr25.core`` exit codes, and ``list`` imports no torch."""

    def python(*args):
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)

    result = python("-m", "iclr25.core", "reproduce", "nosuch", "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "unknown slug(s) 'nosuch'; known slugs:" in result.stderr
    assert not (tmp_path / "out").exists()
    assert python("-m", "iclr25.core", "--version").returncode == 0
    assert python("-m", "iclr25.core", "reproduce", "--frobnicate").returncode == 2
    code = (
        "import io, sys\n"
        "from iclr25.core.cli import main\n"
        "assert main(['list'], out=io.StringIO()) == 0\n"
        "print(sorted({'torch', 'numpy', 'scipy'} & set(sys.modules)))\n"
    )
    result = python("-c", code)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr + result.stdout


def test_info_and_list_show_installed_cards(recorder, monkeypatch):
    card = parse_card(CARD)
    planned = parse_card(dict(CARD, slug="planned_paper", status="planned"))
    monkeypatch.setattr(cli, "discover_cards", lambda: {"fixture_paper": card, "planned_paper": planned})
    code, out, _ = run_cli("info", "fixture_paper")
    assert code == 0 and "A Fixture Paper" in out and "iclr25 reproduce fixture_paper" in out
    code, out, _ = run_cli("info", "fixture_paper", "--json")
    assert code == 0 and json.loads(out) == card.to_dict()
    code, out, _ = run_cli("list", "--json")
    assert code == 0 and [(d["slug"], d["reproducible"]) for d in json.loads(out)] == [
        ("fixture_paper", True),
        ("planned_paper", False),
    ]
    code, out, _ = run_cli("list")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["slug", "package", "status", "reproduce", "title"]
    assert lines[2].split()[:4] == ["fixture_paper", "iclr25-core", "implemented", "yes"]
    assert lines[3].split()[:4] == ["planned_paper", "iclr25-core", "planned", "—"]
    assert "2 papers in the installed distributions; 1 reproducible." in out and recorder.calls == []
    code, _, err = run_cli("info", "nosuch")
    assert code == 2 and "fixture_paper" in err


def test_versions_record_installed_figure_dependencies():
    from importlib import metadata

    found = experiments.versions()
    for dist in experiments.FIGURE_DEPENDENCIES:
        try:
            expected = metadata.version(dist)
        except metadata.PackageNotFoundError:
            assert dist not in found
        else:
            assert found[dist] == expected
    assert found["iclr25-core"] == metadata.version("iclr25-core")


def test_platform_records_the_loaded_cpu_kernels(monkeypatch):
    import os
    import sys

    import numpy  # noqa: F401  (loads NumPy's BLAS, which threadpoolctl then reports)
    import threadpoolctl

    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")  # sets OpenBLAS's GEMM blocking: moves bits like the core type
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    info = experiments.platform_info("cpu")
    assert info["env"]["OPENBLAS_CORETYPE"] == "Haswell" and "ATEN_CPU_CAPABILITY" not in info["env"]
    assert info["env"]["OPENBLAS_L2_SIZE"] == "512"
    assert info["cpu_count"] == os.cpu_count() and info["torch_threads"] == torch.get_num_threads()
    assert info["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    libs = threadpoolctl.threadpool_info()
    assert len(info["blas"]) == len(libs) > 0
    for lib in libs:  # e.g. "openblas 0.3.23.dev SkylakeX": the kernel family decides the rounding
        if lib.get("architecture"):
            assert any(entry.startswith(lib["internal_api"]) and lib["architecture"] in entry for entry in info["blas"])
    assert "gpu" not in info
    json.dumps(info)  # goes into results.json as is

    def broken():
        raise OSError("cannot dlopen")

    monkeypatch.setattr(threadpoolctl, "threadpool_info", broken)  # a finished run still gets its results.json
    assert experiments.platform_info()["blas"] == ["not inspectable: OSError: cannot dlopen"]
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # not installed: recorded as unknown, no crash
    assert experiments.platform_info()["blas"] is None


def test_env_prints_versions_and_platform(monkeypatch):
    for name in experiments.KERNEL_SELECTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    code, out, _ = run_cli("env")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "versions:" and "platform:" in lines
    assert any(line.split()[:2] == ["torch_cpu_capability", torch.backends.cpu.get_cpu_capability()] for line in lines)
    assert any(line.split() == ["env", "MKL_ENABLE_INSTRUCTIONS=AVX2"] for line in lines)
    code, out, _ = run_cli("env", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["versions"] == experiments.versions()
    assert doc["platform"]["env"] == {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}
