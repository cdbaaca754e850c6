"""What the rules read about one run: its facts plus a few derived readings
(vendor, environment, host chip, the capabilities the runtime turned on).

Derivations are conservative: each one returns None when the log does not
show enough, and records the lines it relied on.

RunView is the one object the rules, the engine and the advice read; each concern is a module of
its own, stacked in this order (each reads only what is below it):

- rules/facts.py: the facts, the evidence lines, the devices named, the families printed;
- rules/environment.py: the platform, VM guest or bare metal, the host chip;
- rules/capabilities.py: the capabilities printed or inferred, whether the runtime gates on them;
- rules/proof.py: contrary signs, contradictions, vetoes, the proof and ``remedy_decision``;
- rules/speed.py: best figures and their names, the bandwidth ceiling and published references.
"""

from __future__ import annotations

from analyzer.rules.facts import Peer
from analyzer.rules.proof import KERNEL_COULD_NOT_RUN, KERNEL_FAILURES, KERNEL_WORDS, ProofView, kernel_failure
from analyzer.rules.speed import SpeedView

# what the rules, the engine and the remedy import from here
__all__ = ["KERNEL_COULD_NOT_RUN", "KERNEL_FAILURES", "KERNEL_WORDS", "Peer", "RunView", "kernel_failure"]


class RunView(SpeedView, ProofView):
    """One run as the rules read it (see the module's docstring for where each reading lives)."""

    def peer(self) -> Peer:
        return Peer(id=self.id, environment=self.environment, full_caps=self.full_caps, host_family=self.host_family,
                    remedied=self.remedied, model=self.facts.model, backend=self.facts.backend,
                    gpu_offload=self.gpu_offload, throughput=self.best(), host_chip=self.host_chip,
                    quant=self.facts.quant, build=self.facts.build_commit, created_at=self.created_at)
