"""turbotfx's tests: unit and integration tests here, whole-pipeline runs in e2e/, the
servers and test doubles they start on loopback in doubles/."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
