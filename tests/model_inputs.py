"""Test helper: records what every model built during a call sees when it is evaluated (eval mode, so
no augmentation): the real models and loaders run, a forward pre-hook only copies their input."""

import roarfast.models.spec


def record_eval_inputs(monkeypatch) -> list:
    """Patches the build_model that built-in models' specs call (roarfast.models.spec.resolve_model) so each
    built model logs its eval-mode inputs; returns a list that gets one list of input tensors per model
    built, in build order."""
    real_build = roarfast.models.spec.build_model
    seen = []

    def build_and_watch(*args, **kwargs):
        model = real_build(*args, **kwargs)
        inputs = []
        seen.append(inputs)
        # copies of the model (the weight EMA) keep the hook, so every evaluation of this training is logged
        model.register_forward_pre_hook(lambda module, args: None if module.training else inputs.append(
            args[0].detach().float().clone()))
        return model

    monkeypatch.setattr(roarfast.models.spec, "build_model", build_and_watch)
    return seen
