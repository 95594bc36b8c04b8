import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the long sweeps")


def pytest_collection_modifyitems(config, items):
    import pytest
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="long sweep: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
