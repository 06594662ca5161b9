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


def test_compose_has_a_spark_cluster_the_airflow_tasks_submit_to():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    master, worker, scheduler = services["spark-master"], services["spark-worker"], services["airflow-scheduler"]
    assert "deploy.master.Master" in " ".join(master["entrypoint"])
    assert "deploy.worker.Worker spark://spark-master:7077" in " ".join(worker["entrypoint"])
    assert scheduler["environment"]["SPARK_MASTER"] == "spark://spark-master:7077"
    # Executors read the input and write deduped/ at the path the driver names.
    data = [v for v in scheduler["volumes"] if v.endswith(":/opt/dedup/data")]
    assert data and data[0] in worker["volumes"]
    # The workers run the project's Python kernels: the same image, with Java and pyspark in it.
    assert worker["image"] == scheduler["image"]
    text = (REPO / "Dockerfile").read_text()
    assert "openjdk-17-jre-headless" in text and "requirements-spark.txt" in text
