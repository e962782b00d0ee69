"""The shapes the 128-wide k-tile twins run (tests/test_smallm_ktile128.py emulates their launches
on the CPU, tests/test_gpu_smallm_ktile128.py runs them): every way the small-M family deals."""
# (entry, M, N, K, B given (K, N)): whole tiles, K not a multiple of 128, workspace planes, a cluster
# sum, multicast pairs, shared loads, alternating k-tiles, a one-wave narrow tile (fixup: its own test)
CASES = [("smallm:n64s", 256, 256, 256, False), ("smallm:n64s", 320, 320, 320, True),
         ("smallm:n64s", 512, 512, 512, False), ("smallm:n64s", 64, 72, 200, False), ("smallm:n64s", 7, 64, 64, False),
         ("smallm:n64", 640, 640, 640, False), ("smallm:n64", 16, 4096, 4096, False),
         ("smallm:n64", 256, 1024, 4096, False), ("smallm:n64", 7, 264, 1000, True),
         ("smallm:n64", 1, 4096, 14336, False), ("smallm:n128", 768, 768, 768, False),
         ("smallm:n128", 16, 2048, 16384, False), ("smallm:n128", 100, 4096, 11008, True),
         ("smallm:c2n128", 128, 4096, 4096, False), ("smallm:c2n128", 512, 4096, 4096, False),
         ("smallm:c2n64", 128, 512, 16384, False), ("smallm:c2n64d", 128, 1024, 8192, False),
         ("smallm:n128m2", 1000, 1000, 1000, False), ("smallm:n128m2", 512, 1000, 1024, True),
         ("smallm:n64a2b2", 256, 2048, 4096, False), ("smallm:c2n64a2", 128, 512, 4096, True),
         ("smallm:n64alt", 128, 4096, 4096, False), ("smallm:n64alt", 256, 2048, 4160, False),
         ("smallm:n32", 16, 4096, 4096, False), ("smallm", 16, 11008, 4096, False)]
IDS = [f"{c[0]}-{c[1]}x{c[2]}x{c[3]}{'-kn' if c[4] else ''}" for c in CASES]
