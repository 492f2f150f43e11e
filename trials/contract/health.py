"""Whether a run trained at all: most updates skipped is not healthy, whatever the loss says.

A step whose gradients are not finite (an fp16 overflow, NaN inputs, a NaN in the
model) has its update skipped by the compiled step (trials/step.py: no optimizer
update unless the gradients are finite), and the loss of the next step is computed on
the same weights. A user's loss that masks bad values (``where(isfinite(err), err, 0)``:
its forward pass stays finite, its backward pass does not) then stays finite and
plausible while nothing is learned: the loss guards (non-finite, spike) never fire and
the run would be scored, and picked, on the speed of steps that train nothing.

The rule, one definition for the trial program and for readers of its records:

* a measured step is **blind** when its update was skipped (``updated`` false) or its
  gradient norm is not finite (a norm that overflows to inf clips every gradient to
  zero: the update lands and changes nothing but the optimizer's state);
* a run is **unhealthy** when more than :data:`MAX_BLIND_SHARE` of its measured steps
  are blind. It then ends ``diverged``, with the counts as its reason.

Dynamic loss scaling skips an update by design now and then (it halves the scale on an
overflow and skips that step); over a trial's measured steps that is far below half.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from trials.contract.events import Phase, StepRecord

#: More than this share of the measured steps blind (update skipped, or gradient norm not
#: finite) and the run is unhealthy: more than half of its measured steps trained nothing.
MAX_BLIND_SHARE = 0.5


def is_blind(step: StepRecord) -> bool:
    """The step's update was skipped, or its gradient norm is not finite."""
    return not step.updated or not math.isfinite(step.grad_norm)


def unhealthy_updates(steps: Sequence[StepRecord]) -> str | None:
    """Why the run is unhealthy (its measured steps mostly blind), or None when it is not
    (or measured nothing)."""
    measured = [s for s in steps if s.phase is Phase.MEASURE]
    blind = [s for s in measured if is_blind(s)]
    if not measured or len(blind) <= MAX_BLIND_SHARE * len(measured):
        return None
    skipped = sum(1 for s in blind if not s.updated)
    overflow = sum(1 for s in blind if s.overflow)
    nonfinite_norm = sum(1 for s in blind if not math.isfinite(s.grad_norm))
    return (f"{len(blind)} of {len(measured)} measured steps trained nothing ({skipped} "
            f"updates skipped, {overflow} for non-finite gradients; gradient norm non-finite "
            f"on {nonfinite_norm}), more than {MAX_BLIND_SHARE:.0%}: the run did not train, "
            f"whatever its loss says (first at step {blind[0].step})")
