"""What resuming a results log holds: the memory and time of reading a log of N finished records (what `debate
verify --input ... --output LOG` does first on every re-run, to know what each record answered). Prints figures;
asserts nothing.

    python benchmarks/bench_resume.py --records 50000

The log's records are alike (one factual claim each, as `debate.testing.sample_report` makes it); the memory is
what the resume state holds after the read (tracemalloc), per record.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from debate.results import ResultRecord, scan_results
from debate.testing import sample_report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=50_000, help="records in the log")
    args = parser.parse_args()
    report = sample_report(["factual"])
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        with log.open("w") as fh:
            for i in range(args.records):
                fields = {"id": f"q{i}", "question": "Capital?", "response": f"Paris {i}", "reference": "Paris is."}
                record = ResultRecord.model_validate(
                    {**fields, "line": i + 1, "result": report, "input_sha256": f"{i:064x}"}
                )
                fh.write(record.to_json() + "\n")
        started = time.perf_counter()
        scan_results(log)
        took = time.perf_counter() - started
        tracemalloc.start()
        state = scan_results(log)
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(
        f"{len(state.final):,} records: read in {took:.2f} s; the resume state holds {held / 2**20:.1f} MiB "
        f"({held / args.records:.0f} B per record)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
