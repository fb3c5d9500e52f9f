"""The quota model checked against real Kueue: small scenarios defined once (``scenarios``), the
Kueue objects they stand for (``objects``), and the model's play of them (``play``). The e2e tier
plays the same objects against Kueue's own scheduler (``tests/e2e/test_kueue_conformance.py``)."""
