"""Batch transform through SageMaker's own client: the SageMaker Python SDK (v2) in local mode
runs the serving image as a transform job, both ways users label a bucket of images:

1. single record: a folder of PNG and JPEG files, one image per request (SplitType None,
   strategy SingleRecord): one `.out` of detections JSON per input image;
2. multi record: a JSON Lines file, one `{"image": base64, "id": ...}` per line, one line
   deliberately corrupt (SplitType Line, strategy MultiRecord, AssembleWith Line, a payload
   limit that makes the SDK split the file over several requests): the output has exactly
   one line per input line, in order, ids echoed, an error object on the corrupt line only.

`transform(wait=False)` then `wait(logs=False)`: the waits with logs ask CloudWatch. The
strategy is passed explicitly: the SDK's local mode accepts only its own spelling in
/execution-parameters, and the server answers AWS's (`SINGLE_RECORD`). Network guard,
telemetry switch and loopback-only port as in sagemaker_local_mode.py.

Prints one `checked:` line per property verified and exits non-zero on the first failure.
"""
import argparse
import base64
import json
import pathlib
import sys
import tarfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from sagemaker_local_mode import check, local_session, run_guarded  # noqa: E402


def expect(condition, message):
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serving-image", required=True)
    parser.add_argument("--model-dir", required=True, help="a trained model dir (model.safetensors, ...)")
    parser.add_argument("--images", required=True, help="a folder of .png and .jpg files")
    parser.add_argument("--work", required=True, help="folder for the SDK's container roots and output")
    parser.add_argument("--port", type=int, required=True, help="loopback port for the serving container")
    parser.add_argument("--records", type=int, default=40, help="JSON Lines records (one of them corrupt)")
    args = parser.parse_args()

    session = local_session(args.work, args.port)
    from sagemaker.model import Model

    work = pathlib.Path(args.work).resolve()
    tarball = work / "model.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        for f in pathlib.Path(args.model_dir).iterdir():
            tar.add(f, arcname=f.name)
    role = "arn:aws:iam::111111111111:role/local-mode-test"
    model = Model(image_uri=args.serving_image, model_data=tarball.as_uri(), role=role, sagemaker_session=session)

    images = sorted(p for p in pathlib.Path(args.images).iterdir() if p.suffix in (".png", ".jpg", ".jpeg"))
    expect(any(p.suffix == ".png" for p in images) and any(p.suffix in (".jpg", ".jpeg") for p in images),
           f"{args.images} must hold PNG and JPEG files")

    # 1. Single record: a folder of images, one per request.
    started = time.time()
    out_single = work / "single-out"
    transformer = model.transformer(instance_count=1, instance_type="local", strategy="SingleRecord",
                                    output_path=out_single.as_uri(), accept="application/json")
    transformer.transform(pathlib.Path(args.images).resolve().as_uri(), content_type="application/x-image",
                          split_type=None, wait=False)
    transformer.wait(logs=False)
    outs = {p.name: p for p in out_single.rglob("*.out")}
    expect(sorted(outs) == sorted(p.name + ".out" for p in images),
           f"single record: expected one .out per image, got {sorted(outs)}")
    for image in images:
        answer = json.loads(outs[image.name + ".out"].read_text())
        expect(isinstance(answer, dict) and "detections" in answer and answer["width"] > 0,
               f"{image.name}.out is not a detections answer: {str(answer)[:300]}")
    check(f"Transformer, SingleRecord over {len(images)} PNG/JPEG files: one .out of detections per image "
          f"({time.time() - started:.0f} s)")

    # 2. Multi record: JSON Lines, one corrupt line, spread over several requests.
    started = time.time()
    records_dir = work / "records"
    records_dir.mkdir(exist_ok=True)
    encoded = [base64.b64encode(p.read_bytes()).decode() for p in images]
    # Enough records for ~2.5 MB: with max_payload 1 MB (the SDK's smallest) that is three
    # requests, so the output's alignment across request boundaries is what is checked.
    average = sum(len(e) for e in encoded) / len(encoded)
    args.records = max(args.records, int(2.5 * 2**20 / average) + 1)
    corrupt = args.records // 2
    lines = []
    for i in range(args.records):
        if i == corrupt:
            lines.append(json.dumps({"image": "this is not base64!", "id": f"record-{i}"}))
        else:
            lines.append(json.dumps({"image": encoded[i % len(encoded)], "id": f"record-{i}"}))
    body = "\n".join(lines) + "\n"
    (records_dir / "records.jsonl").write_text(body)
    payload_mb = 1
    out_multi = work / "multi-out"
    transformer = model.transformer(instance_count=1, instance_type="local", strategy="MultiRecord",
                                    assemble_with="Line", accept="application/jsonlines", max_payload=payload_mb,
                                    output_path=out_multi.as_uri())
    transformer.transform(records_dir.as_uri(), content_type="application/jsonlines", split_type="Line",
                          wait=False)
    transformer.wait(logs=False)
    outs = list(out_multi.rglob("records.jsonl.out"))
    expect(len(outs) == 1, f"multi record: expected records.jsonl.out, got {list(out_multi.rglob('*'))}")
    out_lines = outs[0].read_text().split("\n")
    if out_lines and out_lines[-1] == "":
        out_lines.pop()  # the newline AssembleWith=Line put after the last response
    expect(len(out_lines) == args.records,
           f"multi record: {len(out_lines)} output lines for {args.records} input lines "
           f"(blank ones: {sum(1 for line in out_lines if not line.strip())})")
    for i, line in enumerate(out_lines):
        answer = json.loads(line)
        expect(answer.get("id") == f"record-{i}", f"output line {i} answers {answer.get('id')!r}")
        if i == corrupt:
            expect(answer.get("error") == "bad_base64", f"the corrupt line's answer: {line[:300]}")
        else:
            expect("detections" in answer and "error" not in answer, f"output line {i}: {line[:300]}")
    requests = len(body) / (payload_mb * 2**20)
    check(f"Transformer, MultiRecord JSON Lines ({args.records} lines, max_payload {payload_mb} MB, ~{requests:.0f}+ "
          f"requests): one output line per input line, in order, ids echoed, only the corrupt line "
          f"is an error ({time.time() - started:.0f} s)")


if __name__ == "__main__":
    run_guarded(main, "sagemaker_transform.py")
