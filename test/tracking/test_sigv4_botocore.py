"""Our SigV4 signer (tracking/aws_sigv4.h, through build/tests/sigv4_sign) against botocore's
SigV4Auth, the signer the sagemaker-mlflow plugin uses for SageMaker's managed MLflow, on the
kinds of request our MLflow client sends: JSON POSTs to runs/log-batch and friends, GETs with
query strings (spaces, unicode, reserved characters, repeated names), artifact PUTs with binary
bodies, DELETEs, with and without a session token, across regions and dates, with headers that
botocore does not sign. Every Authorization, X-Amz-Date and X-Amz-Security-Token must be equal.
AWS's own test suite is test_aws_sigv4.cpp's."""
import datetime
import json
import os
import pathlib
import random
import subprocess
from unittest import mock

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", str(ROOT / "build")))
SIGNER = BUILD / "tests" / "sigv4_sign"

ARN = "arn:aws:sagemaker:us-west-2:123456789012:mlflow-tracking-server/team-server"


def our_requests():
    rng = random.Random(41)
    run_id = "0f3c9a1b2c4d4e5f8a9b0c1d2e3f4a5b"
    metrics = [{"key": name, "value": rng.random(), "timestamp": 1764244800000 + i, "step": i}
               for i, name in enumerate(["loss", "loss_box_reg", "lr", "images_per_s", "bbox/AP"] * 4)]
    json_headers = [["Content-Type", "application/json"], ["x-mlflow-sm-tracking-server-arn", ARN],
                    ["User-Agent", "mrcnn-trainer/1.0"], ["Connection", "keep-alive"]]
    out = []

    def add(method, path, query=(), headers=json_headers, body=b"", **over):
        item = {"method": method, "host": "us-west-2.experiments.sagemaker.aws", "path": path,
                "query": [list(pair) for pair in query], "headers": [list(h) for h in headers],
                "body": body, "access_key": "AKIAIOSFODNN7EXAMPLE",
                "secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "session_token": "",
                "region": "us-west-2", "service": "sagemaker-mlflow", "time": 1764244800}
        item.update(over)
        out.append(item)

    base = "/api/2.0/mlflow"
    add("POST", f"{base}/experiments/create", body=json.dumps({"name": "mask-rcnn-coco"}).encode())
    add("GET", f"{base}/experiments/get-by-name", [("experiment_name", "mask rcnn / drone (v2)")], json_headers[1:])
    add("GET", f"{base}/experiments/get-by-name", [("experiment_name", "Ünïcödé 実験 ✓")], json_headers[1:])
    add("POST", f"{base}/runs/create", body=json.dumps(
        {"experiment_id": "7", "run_name": "job-2026-11-27", "start_time": 1764244800000,
         "tags": [{"key": "mlflow.user", "value": "sagemaker"}]}).encode())
    add("POST", f"{base}/runs/log-batch", body=json.dumps({"run_id": run_id, "metrics": metrics}).encode())
    add("POST", f"{base}/runs/log-batch", body=json.dumps(
        {"run_id": run_id, "params": [{"key": "SOLVER.BASE_LR", "value": "0.02"},
                                      {"key": "MODEL.ROI_HEADS.NUM_CLASSES", "value": "80"}]}).encode(),
        session_token="IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLXdlc3QtMiJHMEUCIQ+/=")
    add("POST", f"{base}/runs/update", body=json.dumps(
        {"run_id": run_id, "status": "FINISHED", "end_time": 1764248400000}).encode())
    add("POST", f"{base}/runs/update", body=json.dumps(
        {"run_id": run_id, "status": "FAILED"}).encode(), region="eu-central-1",
        host="eu-central-1.experiments.sagemaker.aws")
    add("GET", f"{base}/runs/get", [("run_id", run_id)], json_headers[1:])
    add("GET", f"{base}/metrics/get-history", [("run_id", run_id), ("metric_key", "bbox/AP"),
                                               ("max_results", "25000")], json_headers[1:])
    add("GET", f"{base}/metrics/get-history", [("metric_key", "a+b=c&d"), ("run_id", run_id),
                                               ("metric_key", "a b")], json_headers[1:])
    add("GET", f"{base}/experiments/search", [("max_results", "1000"), ("filter", "name LIKE 'mask%'"),
                                              ("order_by", "creation_time DESC")], json_headers[1:])
    artifacts = "/api/2.0/mlflow-artifacts/artifacts"
    add("PUT", f"{artifacts}/7/{run_id}/artifacts/config.yaml", headers=[
        ["Content-Type", "application/octet-stream"], ["x-mlflow-sm-tracking-server-arn", ARN]],
        body=b"MODEL:\n  WEIGHTS: ''\nSOLVER:\n  BASE_LR: 0.02\n")
    add("PUT", f"{artifacts}/7/{run_id}/artifacts/model/model.safetensors", headers=[
        ["Content-Type", "application/octet-stream"], ["x-mlflow-sm-tracking-server-arn", ARN]],
        body=bytes(rng.randrange(256) for _ in range(65536)), session_token="FwoGZXIvYXdzEBYaDK+/token==")
    add("PUT", f"{artifacts}/7/{run_id}/artifacts/report%20page.html", headers=[
        ["Content-Type", "text/html; charset=utf-8"], ["x-mlflow-sm-tracking-server-arn", ARN]],
        body="<h1>box AP 37.9 ✓</h1>".encode())
    add("GET", f"{artifacts}/7/{run_id}/artifacts/metrics.jsonl", headers=[["x-mlflow-sm-tracking-server-arn", ARN]])
    add("DELETE", f"{artifacts}/7/{run_id}/artifacts/tmp/old.bin", headers=[["x-mlflow-sm-tracking-server-arn", ARN]])
    add("POST", f"{base}/runs/log-batch", headers=json_headers + [["X-Custom", "  spaced \t value  "],
                                                                  ["x-custom", "second"],
                                                                  ["Expect", "100-continue"],
                                                                  ["X-Amzn-Trace-Id", "Root=1-5759e988"]],
        body=json.dumps({"run_id": run_id, "tags": [{"key": "hosts", "value": "algo-1,algo-2"}]}).encode())
    add("POST", f"{base}/runs/log-batch", headers=json_headers + [["X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD"]],
        body=b'{"run_id": "x"}')
    add("GET", "/api/2.0/mlflow/experiments/get", [("experiment_id", "0")], json_headers[1:],
        host="localhost:5000", region="us-east-1", time=1451606399)
    add("POST", f"{base}/runs/delete", body=b"", time=1767225600)
    add("GET", f"{base}/runs/search", [("experiment_ids", "1"), ("experiment_ids", "10"), ("experiment_ids", "2")],
        json_headers[1:], region="ap-southeast-2", host="ap-southeast-2.experiments.sagemaker.aws")
    return out


def test_our_signer_equals_botocore_on_our_requests():
    assert SIGNER.is_file(), f"{SIGNER} is missing: build the sigv4_sign target"
    requests = our_requests()
    assert len(requests) >= 20
    wire = [{**{k: v for k, v in item.items() if k != "body"}, "body_hex": item["body"].hex()}
            for item in requests]
    ours = json.loads(subprocess.run([str(SIGNER)], input=json.dumps(wire).encode(), check=True,
                                     capture_output=True).stdout)
    assert len(ours) == len(requests)
    for item, mine in zip(requests, ours):
        url = f"https://{item['host']}{item['path']}"
        if mine["url_query"]:
            url += "?" + mine["url_query"]
        aws = AWSRequest(method=item["method"], url=url, data=item["body"])
        for name, value in item["headers"]:
            aws.headers[name] = value  # an email.message header map: repeated names are kept
        credentials = Credentials(item["access_key"], item["secret_key"], item["session_token"] or None)
        when = datetime.datetime.fromtimestamp(item["time"], datetime.timezone.utc).replace(tzinfo=None)
        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            SigV4Auth(credentials, item["service"], item["region"]).add_auth(aws)
        expected = {"Authorization": aws.headers["Authorization"], "X-Amz-Date": aws.headers["X-Amz-Date"]}
        if item["session_token"]:
            expected["X-Amz-Security-Token"] = aws.headers["X-Amz-Security-Token"]
        assert dict(mine["headers"]) == expected, (
            f"{item['method']} {url}\nours:\n{mine['canonical_request']}\n"
            f"botocore:\n{SigV4Auth(credentials, item['service'], item['region']).canonical_request(aws)}")
