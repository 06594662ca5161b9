"""docker-compose.yml and Dockerfile: they cannot run here, but they must be right."""

import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO


def test_compose_has_the_airflow3_layout_and_registry_db():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer", "airflow-init", "postgres", "dedup-db"):
        assert name in services
    assert services["airflow-apiserver"]["command"] == "api-server"
    env = services["airflow-scheduler"]["environment"]
    assert env["AIRFLOW_CONN_DEDUP_DB"].startswith("postgresql://") and "dedup-db" in env["AIRFLOW_CONN_DEDUP_DB"]
    assert any(v.endswith(":/opt/dedup/data") for v in services["airflow-scheduler"]["volumes"])


def test_dockerfile_builds_on_airflow_33():
    text = (REPO / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM apache/airflow:3.3." in text
    assert "requirements.txt" in text and "dedup_tasks" in text


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_compose_config_validates():
    result = subprocess.run(["docker-compose", "config", "-q"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
