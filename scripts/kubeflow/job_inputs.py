"""Turns the pipeline's flat parameters into the structured inputs of the SageMaker
training component: HyperParameters, InputDataConfig channels and CheckpointConfig.

It runs as the first pipeline step (`python3 -c <this file> ...` inside the SageMaker
components image), because pipeline parameters are only known at run time and some of
them decide whether a key exists at all (an empty `resume` means "decide from the
checkpoint", an empty weights URI means "no weights channel"). Standard library only
and Python 3.7-compatible, since the components image provides nothing else.

The hyperparameters are the ones `trainer train` understands (trainer/engine/config/job_config.h):
`config-file`, `opts`, `resume`, `eval-only`, sent as plain strings the way raw-API
users send them; the entrypoint decodes them as the contract describes."""
import argparse
import json
import sys

# Where SageMaker restores and syncs checkpoints inside the container; the trainer
# reads it back from checkpointconfig.json.
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
# Keys this step owns: extra hyperparameters may not silently override them.
OWN_KEYS = ("config-file", "opts", "resume", "eval-only")


class JobInputError(ValueError):
    pass


def parse_bool(name, text):
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise JobInputError("pipeline parameter {}: expected true or false, got {!r}".format(name, text))


def check_s3_uri(name, uri, required):
    if not uri:
        if required:
            raise JobInputError("pipeline parameter {}: an s3:// URI is required".format(name))
        return
    if not uri.startswith("s3://") or len(uri) <= len("s3://"):
        raise JobInputError("pipeline parameter {}: expected an s3://bucket/prefix URI, got {!r}".format(name, uri))


def hyperparameters(config_file, opts, resume, eval_only, extra):
    """The HyperParameters map: only the keys that were configured, all values strings."""
    if not isinstance(extra, dict):
        raise JobInputError("pipeline parameter extra_hyperparameters: expected a JSON object")
    result = {}
    if config_file:
        result["config-file"] = config_file
    if opts.strip():
        result["opts"] = opts
    resume_text = resume.strip().lower()
    if resume_text:
        if resume_text not in ("true", "false"):
            raise JobInputError(
                "pipeline parameter resume: expected true, false or empty (resume when a "
                "checkpoint exists), got {!r}".format(resume))
        result["resume"] = resume_text
    if eval_only:
        result["eval-only"] = "true"
    for key, value in extra.items():
        if key in OWN_KEYS:
            raise JobInputError(
                "pipeline parameter extra_hyperparameters: {!r} has its own pipeline parameter "
                "({}); set it there".format(key, key.replace("-", "_")))
        if not isinstance(value, str):
            # SageMaker accepts strings only; JSON-encode like the Python SDK does.
            value = json.dumps(value)
        result[key] = value
    if len(result) > 100:
        raise JobInputError("SageMaker allows at most 100 hyperparameters, got {}".format(len(result)))
    return result


def channel(name, uri, input_mode):
    return {
        "ChannelName": name,
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": uri,
                "S3DataDistributionType": "FullyReplicated",
            }
        },
        "CompressionType": "None",
        "RecordWrapperType": "None",
        "InputMode": input_mode,
    }


def channels(train_uri, val_uri, weights_uri, input_mode):
    """train and val always; weights only when a URI is given."""
    if input_mode not in ("File", "FastFile", "Pipe"):
        raise JobInputError(
            "pipeline parameter training_input_mode: expected File, FastFile or Pipe, got {!r}".format(input_mode))
    check_s3_uri("train_s3_uri", train_uri, required=True)
    check_s3_uri("val_s3_uri", val_uri, required=True)
    check_s3_uri("weights_s3_uri", weights_uri, required=False)
    result = [channel("train", train_uri, input_mode), channel("val", val_uri, input_mode)]
    if weights_uri:
        result.append(channel("weights", weights_uri, input_mode))
    return result


def checkpoint_config(checkpoint_uri, spot_instance, max_run_time, max_wait_time):
    check_s3_uri("checkpoint_s3_uri", checkpoint_uri, required=spot_instance)
    if spot_instance and max_wait_time < max_run_time:
        raise JobInputError(
            "pipeline parameters max_wait_time_s ({}) must be >= max_run_time_s ({}) for spot "
            "training".format(max_wait_time, max_run_time))
    if not checkpoint_uri:
        return {}
    return {"S3Uri": checkpoint_uri, "LocalPath": CHECKPOINT_LOCAL_PATH}


def main(argv):
    parser = argparse.ArgumentParser(prog="job_inputs")
    for name in ("config-file", "opts", "resume", "eval-only", "extra-hyperparameters", "train", "val", "weights",
                 "input-mode", "checkpoint-s3-uri", "spot-instance", "max-run-time", "max-wait-time",
                 "hyperparameters-out", "channels-out", "checkpoint-config-out"):
        parser.add_argument("--" + name, required=True)
    args = parser.parse_args(argv)
    try:
        extra = json.loads(args.extra_hyperparameters) if args.extra_hyperparameters.strip() else {}
        hps = hyperparameters(args.config_file, args.opts, args.resume, parse_bool("eval_only", args.eval_only),
                              extra)
        chans = channels(args.train, args.val, args.weights, args.input_mode)
        ckpt = checkpoint_config(args.checkpoint_s3_uri, parse_bool("spot_instance", args.spot_instance),
                                 int(args.max_run_time), int(args.max_wait_time))
    except (JobInputError, ValueError) as error:
        sys.stderr.write("job_inputs: {}\n".format(error))
        return 2
    for path, value in ((args.hyperparameters_out, hps), (args.channels_out, chans),
                        (args.checkpoint_config_out, ckpt)):
        write_output(path, value)
    sys.stdout.write("hyperparameters: {}\n".format(json.dumps(hps, sort_keys=True)))
    return 0


def write_output(path, value):
    import os

    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent)
    with open(path, "w") as out:
        json.dump(value, out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
