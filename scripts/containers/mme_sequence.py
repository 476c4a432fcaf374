"""A multi-model endpoint driven as SageMaker drives one, against a running serving container
(SAGEMAKER_MULTI_MODEL=true) on a loopback port: load, duplicate 409, invoke, unknown 404,
list, delete then 404; then every model round robin under a memory budget that holds two,
loading on 404 as SageMaker does (the loads evict the least recently used model, and no
request fails); then a model larger than the whole budget gets 507.

Prints one `checked:` line per property and exits non-zero on the first failure. Standard
library only (runs with the host's python3).

  mme_sequence.py --port P --image photo.jpg --model a=/opt/ml/models/a ... --too-big big=/opt/ml/models/big
"""
import argparse
import http.client
import json
import sys
import time


def request(port, method, path, body=b"", headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        reply = connection.getresponse()
        data = reply.read()
        return reply.status, data
    finally:
        connection.close()


def load(port, name, url):
    return request(port, "POST", "/models", json.dumps({"model_name": name, "url": url}).encode(),
                   {"Content-Type": "application/json"})


def invoke(port, name, image):
    return request(port, "POST", f"/models/{name}/invoke", image,
                   {"Content-Type": "image/jpeg", "X-Amzn-SageMaker-Target-Model": f"{name}.tar.gz"})


def expect(condition, message):
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def check(message):
    print(f"checked: {message}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--image", required=True, help="a JPEG to invoke the models with")
    parser.add_argument("--model", action="append", required=True, help="NAME=URL (a model dir in the container)")
    parser.add_argument("--too-big", required=True, help="NAME=URL of a model larger than the budget")
    args = parser.parse_args()
    image = open(args.image, "rb").read()
    models = [tuple(spec.split("=", 1)) for spec in args.model]
    expect(len(models) >= 3, "give at least 3 models (the budget holds 2)")
    port = args.port

    status, _ = request(port, "GET", "/ping")
    expect(status == 200, f"/ping with no model loaded: {status}")
    check("/ping is 200 with no model loaded")
    first, url = models[0]
    started = time.time()
    status, data = load(port, first, url)
    expect(status == 200, f"POST /models {first}: {status} {data[:300]!r}")
    check(f"POST /models {first}: 200 in {time.time() - started:.1f} s")
    status, data = load(port, first, url)
    expect(status == 409 and json.loads(data)["error"] == "model_already_loaded", f"duplicate load: {status} {data!r}")
    check("loading it again: 409 model_already_loaded")
    status, data = invoke(port, first, image)
    expect(status == 200 and "detections" in json.loads(data), f"invoke {first}: {status} {data[:300]!r}")
    check(f"POST /models/{first}/invoke: 200 with {len(json.loads(data)['detections'])} detections")
    status, data = invoke(port, "no-such-model", image)
    expect(status == 404 and json.loads(data)["error"] == "model_not_found", f"unknown model: {status} {data!r}")
    check("invoking an unknown model: 404 model_not_found")
    status, data = request(port, "GET", "/models")
    listed = [m["modelName"] for m in json.loads(data)["models"]]
    expect(status == 200 and listed == [first], f"GET /models: {status} {data!r}")
    status, data = request(port, "GET", f"/models/{first}")
    expect(status == 200 and json.loads(data)["modelUrl"] == url, f"GET /models/{first}: {status} {data!r}")
    check(f"GET /models lists {listed}; GET /models/{first} names its url")
    status, _ = request(port, "DELETE", f"/models/{first}")
    expect(status == 200, f"DELETE /models/{first}: {status}")
    status, _ = request(port, "GET", f"/models/{first}")
    expect(status == 404, f"GET after DELETE: {status}")
    status, _ = invoke(port, first, image)
    expect(status == 404, f"invoke after DELETE: {status}")
    check("DELETE: 200, then GET and invoke are 404")

    loads, evicted, started = 0, [], time.time()
    for _ in range(2):
        for name, url in models:
            status, data = invoke(port, name, image)
            if status == 404:  # what SageMaker does: load, then invoke again
                status, data = load(port, name, url)
                expect(status == 200, f"round robin: loading {name}: {status} {data[:300]!r}")
                loads += 1
                evicted += json.loads(data)["evicted"]
                status, data = invoke(port, name, image)
            expect(status == 200, f"round robin: invoking {name}: {status} {data[:300]!r}")
            status, data = request(port, "GET", "/models")
            expect(len(json.loads(data)["models"]) <= 2, f"more than 2 models loaded: {data!r}")
    expect(evicted, "no model was evicted although the budget holds 2")
    check(f"{len(models)} models round robin, twice, under a budget for 2: {loads} loads, {len(evicted)} LRU "
          f"evictions, every request 200 ({time.time() - started:.0f} s)")

    name, url = args.too_big.split("=", 1)
    status, data = load(port, name, url)
    expect(status == 507 and json.loads(data)["error"] == "insufficient_memory",
           f"a model larger than the budget: {status} {data!r}")
    check(f"a model larger than the whole budget: 507 insufficient_memory ({json.loads(data)['detail'][:80]}...)")
    print(f"evicted: {' '.join(evicted)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
