"""The SmoothGrad family: SG (mean), SG-SQ (mean of squares) and VAR (variance) of each gradient estimator's
maps over noisy copies of each image (the math: roarfast.methods.ensembles). The three statistics of one base
come from one set of noisy samples, so they register together; each reads what its base reads, plus the
samples and the noise level, and needs what its base needs of the model. The noisy copies' classes are
found up front (target_mode "given"): a noisy copy's own prediction may differ from the image's."""

from functools import partial

from roarfast.methods.declaration import register_shared
from roarfast.methods.estimators.gradients import BASES, CITES

#: the statistics, in the order roarfast.methods.ensembles.smoothgrad_statistics returns them
STATISTICS = {"sg": "SmoothGrad (mean)", "sg-sq": "SmoothGrad-squared (mean of squares)", "var": "VarGrad (variance)"}
#: the papers each statistic comes from: SmoothGrad (Smilkov et al. 2017), SmoothGrad-squared (Hooker et al. 2019),
#: VarGrad (Adebayo et al. 2018); a member cites its base estimator's too
STATISTIC_CITES = {"sg": ("smilkov2017smoothgrad",), "sg-sq": ("smilkov2017smoothgrad", "hooker2019benchmark"),
                   "var": ("adebayo2018local",)}


def _family(model, batch, target, params, names, base, statistic_of):
    """Maps of the requested `names` among sg-<base>, sg-sq-<base>, var-<base> (statistic_of: name -> its
    statistic)."""
    # late: loads torch, and the --method listing imports this module
    from roarfast.methods.ensembles import smoothgrad_statistics

    stats = dict(zip(STATISTICS, smoothgrad_statistics(model, batch, target, params, base)))
    return {name: stats[statistic_of[name]] for name in names}


for _base, _declared in BASES.items():
    _statistic_of = {f"{stat}-{_base}": stat for stat in STATISTICS}
    register_shared({name: f"{STATISTICS[stat]} of {_base} over noisy copies" for name, stat in _statistic_of.items()},
                    reads=("samples", "noise_level", *_declared["reads"]), seeded=True,
                    requires=_declared["requires"], compilable=_declared["compilable"], order=2, base=_base,
                    cites={name: STATISTIC_CITES[stat] + CITES[_base] for name, stat in _statistic_of.items()})(
        partial(_family, base=_base, statistic_of=_statistic_of))
