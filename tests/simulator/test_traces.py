"""Trace adapters and the synthetic generator: good rows in, bad rows named precisely."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.traces import TraceError, load_trace, synthetic_trace

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_synthetic_trace_is_deterministic_and_sorted() -> None:
    a, b = synthetic_trace(50, seed=4), synthetic_trace(50, seed=4)
    assert a.jobs == b.jobs and a.jobs != synthetic_trace(50, seed=5).jobs
    assert [j.submit for j in a.jobs] == sorted(j.submit for j in a.jobs)
    assert {j.queue for j in a.jobs} <= {"team-a", "team-b", "team-c"}
    assert all(j.gpus in (1, 2, 4, 8, 16) and j.duration >= 1200 for j in a.jobs)


def test_own_csv_format(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "t.csv",
        "name,submit_s,gpus,duration_s,queue,priority,total_steps\n"
        "a,100,4,3600,team-a,10,5000\nb,50,1,600,,,\n",
    )
    trace = load_trace(p)
    assert [j.name for j in trace.jobs] == ["b", "a"]
    assert trace.jobs[0].submit == 0.0 and trace.jobs[1].submit == 50.0
    assert (
        trace.jobs[1].priority == 10
        and trace.jobs[1].total_steps == 5000
        and trace.jobs[0].queue == "default"
    )


@pytest.mark.parametrize("fmt", ["auto", "csv"])
def test_a_csv_saved_with_a_byte_order_mark_and_crlf_reads_as_without(tmp_path: Path, fmt: str) -> None:
    """A spreadsheet's "CSV UTF-8" export starts with a byte-order mark: the header read
    '\ufeffname', unrecognised (auto) or missing its name column (csv), beside the very names the
    error listed as needed."""
    p = tmp_path / "t.csv"
    p.write_bytes(b"\xef\xbb\xbfname,submit_s,gpus,duration_s\r\na,0,8,7200\r\nb,100,4,3600\r\n")
    t = load_trace(p, fmt)
    assert [(j.name, j.gpus, j.duration) for j in t.jobs] == [("a", 8, 7200.0), ("b", 4, 3600.0)]


def test_a_csv_traces_workload_type_column_reaches_its_jobs(tmp_path: Path) -> None:
    """The column was read, then dropped when the rows were rebased to the trace's start: no
    trace's labels ever reached its jobs, and a policy's workload-type selector saw none."""
    from simulator.curves import CurveLibrary
    from simulator.jobs import WorldConfig, build_jobs

    p = _write(
        tmp_path,
        "t.csv",
        "name,submit_s,gpus,duration_s,queue,priority,total_steps,workload_type\n"
        "llm,100,32,86400,,,100000,pretraining\nft,160,8,7200,,,3000,fine-tuning\nx,200,1,600,,,,\n",
    )
    trace = load_trace(p)
    assert [(j.name, j.submit, j.workload_type) for j in trace.jobs] == [
        ("llm", 0.0, "pretraining"),
        ("ft", 60.0, "fine-tuning"),
        ("x", 100.0, None),
    ]
    jobs = build_jobs(trace.jobs, {"default": "cq"}, WorldConfig(), CurveLibrary(), seed=0)
    assert [j.labels.get("workload-type") for j in jobs] == ["pretraining", "fine-tuning", None]


@pytest.mark.parametrize(
    ("row", "field", "reason"),
    [
        ("x,10,0,60", "gpus", "must be > 0"),
        ("x,10,two,60", "gpus", "not a number"),
        ("x,10,1.5,60", "gpus", "must be an integer"),
        ("x,-1,1,60", "submit_s", "must be >= 0"),
        ("x,10,1,", "duration_s", "missing value"),
        ("x,10,1,nan", "duration_s", "not finite"),
        # the jobs a row stopped are named by it: two of one name could not be told apart
        ("ok,10,1,60", "name", "'ok' is also line 2's: names are unique"),
    ],
)
def test_malformed_row_names_file_line_field_and_reason(
    tmp_path: Path, row: str, field: str, reason: str
) -> None:
    p = _write(tmp_path, "bad.csv", f"name,submit_s,gpus,duration_s\nok,0,1,60\n{row}\n")
    with pytest.raises(TraceError) as err:
        load_trace(p)
    msg = str(err.value)
    assert f"{p}:3:" in msg and repr(field) in msg and reason in msg


def test_skip_bad_rows_counts_them(tmp_path: Path) -> None:
    p = _write(
        tmp_path, "bad.csv", "name,submit_s,gpus,duration_s\nok,0,1,60\nbad,0,0,60\nworse,x,1,1\nok2,5,2,9\n"
    )
    trace = load_trace(p, skip_bad_rows=True)
    assert [j.name for j in trace.jobs] == ["ok", "ok2"] and trace.skipped == 2
    assert "bad.csv:3" in trace.skipped_reasons[0]


def test_philly_itp_and_tiresias_shapes(tmp_path: Path) -> None:
    philly = _write(
        tmp_path,
        "philly.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-10-09 06:13:03,2951.0,8,23608.0,6214e9\n",
    )
    t = load_trace(philly)
    assert t.source.startswith("philly") and [j.queue for j in t.jobs] == ["vc-6214e9", "vc-11cb48"]
    assert t.jobs[1].submit == pytest.approx(48 * 60 + 52)
    itp = _write(tmp_path, "cluster01.csv", "job_id,submission_time,duration,num_gpu\nabc,100,600,2\n")
    assert load_trace(itp).jobs[0].gpus == 2
    tir = _write(
        tmp_path,
        "60_job.csv",
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,164,30\n",
    )
    assert load_trace(tir).jobs[0].total_steps == 606


def test_unknown_header_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="unrecognised header"):
        load_trace(_write(tmp_path, "x.csv", "a,b\n1,2\n"))
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "nope.csv")
    with pytest.raises(TraceError, match="missing column"):
        load_trace(_write(tmp_path, "y.csv", "timestamp,duration\n1,2\n"), "philly")


@pytest.mark.data
def test_real_traces_load_when_present() -> None:
    philly = DATA / "pollux-osdi21" / "simulator" / "traces" / "philly.csv"
    gavel = DATA / "gavel" / "scheduler" / "traces" / "physical_cluster" / "small_test.trace"
    itp = DATA / "microsoft-itp" / "elasticflow" / "cluster01.csv"
    if not philly.exists():
        pytest.skip("shared data not present")
    assert len(load_trace(philly, limit=500).jobs) == 500
    assert all(j.total_steps for j in load_trace(gavel).jobs)
    assert all(j.total_steps for j in load_trace(itp, limit=50).jobs)
