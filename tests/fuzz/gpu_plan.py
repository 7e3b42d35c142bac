"""Schedule text as a dependency graph of steps, emitted in a random legal order.

A GPU-schedule recipe (``gen_gpu_schedule``) adds steps: one or more lines of a
schedule function, the Python names they need (handles, axes) and give, and
ordering tokens (``"C:fresh"``: no transform of C may precede its ``cache_write``).
``order`` walks the graph picking a random ready step each time, so every order
the recipe's data flow allows can come out, TVM's tutorial orders (a shared
stage attached before its local reader, ``double_buffer`` before ``compute_at``)
among them; with probability ``p_program`` it keeps the order the recipe wrote.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Step:
    text: str
    needs: frozenset
    gives: frozenset
    after: frozenset = frozenset()     # tokens that must come first (no names defined)
    seq: int = 0


@dataclass
class Plan:
    """Steps of one schedule function plus what the case declares about it."""

    steps: list = field(default_factory=list)
    features: set = field(default_factory=set)
    intent: str = "legal"             # 'legal', 'may' (refusal or right answer), 'illegal'
    why: str = ""                      # for 'may'/'illegal': what the schedule does
    memo: dict = field(default_factory=dict)      # choices the steps share (the pipeline depth)

    def add(self, text: str, needs=(), gives=(), after=()):
        self.steps.append(Step(text, frozenset(needs), frozenset(gives), frozenset(after), len(self.steps)))

    def feature(self, *names):
        self.features.update(names)

    def mark(self, intent: str, why: str, feature: str | None = None):
        """Declare the schedule 'may' (either outcome is right) or 'illegal' (must be refused)."""
        rank = {"legal": 0, "may": 1, "illegal": 2}
        if rank[intent] >= rank[self.intent]:
            self.intent, self.why = intent, why if rank[intent] > rank[self.intent] or not self.why else self.why
        if feature:
            self.features.add(feature)

    def order(self, rng, p_program: float = 0.35) -> list:
        """The lines in a random order that respects every step's needs."""
        have = {"s"}
        left = list(self.steps)
        done_tokens = set()
        out = []
        in_order = rng.random() < p_program
        while left:
            ready = [st for st in left if st.needs <= have and st.after <= done_tokens]
            if not ready:     # a recipe bug: report it loudly (the fuzzer's own error)
                raise RuntimeError("gpu_plan: no step is ready: "
                                   + "; ".join(f"{st.text} needs {sorted(st.needs - have)} "
                                               f"after {sorted(st.after - done_tokens)}" for st in left[:3]))
            st = ready[0] if in_order else ready[int(rng.integers(len(ready)))]
            left.remove(st)
            have |= st.gives
            done_tokens |= st.gives
            out.append(st.text)
        if not in_order and out != [st.text for st in self.steps]:
            self.features.add("shuffled_order")
        return out
