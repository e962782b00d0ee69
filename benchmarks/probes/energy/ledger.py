"""Join ncu's per-kernel traffic counts (run_energy.sh, `--csv --page raw`) with the power probe's
energy per FLOP (probe_power.py --json): one row per (size, kernel), each level's traffic per
GFLOP, and each column relative to cuBLAS at the same size. The ncu rows come in the order of
ncu_l2.py's cases (sizes outer, keys inner, as run_energy.sh builds them); the kernel names are
printed so that the pairing can be checked by eye.

    python ledger.py --ncu ncu_raw.csv --power power.json [--keys cublas,9,9:c1,8,10] [--sizes 4096,2048,8192]
"""
import argparse, csv, json, sys

COLUMNS = [  # (metric, short name, scale to per-GFLOP units)
    ("dram__bytes_read.sum", "DRAM rd MB", 1e-6),
    ("dram__bytes_write.sum", "DRAM wr MB", 1e-6),
    ("lts__t_sectors_srcunit_tex_op_read.sum", "L2 rd Msect", 1e-6),
    ("lts__t_sectors.sum", "L2 all Msect", 1e-6),
    ("l1tex__m_xbar2l1tex_read_bytes.sum", "xbar->SM MB", 1e-6),
    ("l1tex__data_bank_reads.sum", "smem rd M", 1e-6),
    ("l1tex__data_bank_writes.sum", "smem wr M", 1e-6),
    # the L2 request coalescer (between the SMs and L2): read sectors asked for by the SMs, merged in hardware
    # (same sector, near the same time) or by multicast ("programmatic"), and sent on to L2
    ("lrc__request_sectors_op_read_coalescable.sum", "LRC coalescable Msect", 1e-6),
    ("lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum", "LRC hw-merged Msect", 1e-6),
    ("lrc__request_sectors_op_read_coalescing_achieved_type_programmatic.sum", "LRC mc-merged Msect", 1e-6),
    ("lrc__lrc2xbar_sectors_op_read.sum", "LRC->L2 Msect", 1e-6),
    ("lrc__xbar2gpc_sectors_op_read.sum", "L2->GPC Msect", 1e-6),
    ("lts__t_requests_srcunit_ltcfabric.sum", "L2 fabric Mreq", 1e-6),
]


def number(text):
    text = text.replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return None


def read_ncu(path):
    """The raw page's kernel rows: [(kernel name, {metric: value})]."""
    lines = [ln for ln in open(path) if ln.startswith('"')]
    rows = list(csv.reader(lines))
    if len(rows) < 3:
        sys.exit(f"{path}: no kernel rows (ncu's raw page has a header, a units row, then one row per kernel)")
    head = rows[0]
    name = head.index("Kernel Name")
    out = []
    for r in rows[2:]:
        out.append((r[name], {m: number(v) for m, v in zip(head, r) if "__" in m}))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncu", required=True)
    ap.add_argument("--power", required=True)
    ap.add_argument("--keys", default="cublas,9,9:c1,8,10")
    ap.add_argument("--sizes", default="4096,2048,8192")
    args = ap.parse_args()
    keys, sizes = args.keys.split(","), [int(s) for s in args.sizes.split(",")]
    kernels = read_ncu(args.ncu)
    cases = [(s, k) for s in sizes for k in keys]
    if len(kernels) != len(cases):
        sys.exit(f"{args.ncu}: {len(kernels)} kernel rows for {len(cases)} cases; pair them by hand")
    power = {(r["size"], r["kernel"]): r for r in json.load(open(args.power))["rows"]}
    table = {}
    for (size, key), (kname, m) in zip(cases, kernels):
        gflop = 2.0 * size ** 3 / 1e9
        row = {"kernel name": kname[:40]}
        for metric, short, scale in COLUMNS:
            v = m.get(metric)
            row[short] = None if v is None else v * scale / gflop
        p = power.get((size, key), {})
        row["pJ/FLOP"], row["MHz"] = p.get("pj_per_flop"), p.get("clock_mhz")
        table[(size, key)] = row
    cols = [c for _, c, _ in COLUMNS] + ["pJ/FLOP", "MHz"]
    cols = [c for c in cols if any(row.get(c) is not None for row in table.values())]  # metrics ncu counted
    print("per GFLOP; in brackets: relative to cuBLAS at the same size")
    for size in sizes:
        print(f"\n{size}^3  " + "  ".join(f"{c:>18s}" for c in cols))
        base = table.get((size, "cublas"), {})
        for key in keys:
            row = table[(size, key)]
            cells = []
            for c in cols:
                v, b = row.get(c), base.get(c)
                if v is None:
                    cells.append(f"{'-':>18s}")
                elif b:
                    cells.append(f"{v:10.3f} ({v / b:5.3f})")
                else:
                    cells.append(f"{v:18.3f}")
            print(f"{key:10s} " + "  ".join(cells) + f"   {row['kernel name']}")


if __name__ == "__main__":
    main()
