"""TF Serving's own tests of its gRPC APIs, ported to run against tfs-model-server over gRPC.

Ported from tensorflow/serving at commit 9d981c5c, keeping each C++ TEST's name in the test
ids:

- servables/tensorflow/classifier_test.cc        ClassifierTest (method-name check off and on)
- servables/tensorflow/regressor_test.cc         RegressorTest (method-name check off and on)
- servables/tensorflow/predict_util_test.cc      PredictImplTest
- servables/tensorflow/multi_inference_test.cc   MultiInferenceTest (TF1 and TF2 models)
- servables/tensorflow/get_model_metadata_impl_test.cc  GetModelMetadataImplTest
- model_servers/get_model_status_impl_test.cc    GetModelStatusImplTest
- servables/tensorflow/util_test.cc              InputUtilTest and ModelSpecTest, as far as they
                                                 show in responses

The C++ tests' FakeSession and MockSession become real graphs built here (`classifier`,
`regressor`): the fake's behaviour (classes and scores copied from each Example's "class"
and "score" features; the regression output from its "output" feature) and each mocked
output (wrong batch size, wrong dtype, a failing run) is a signature of its own. Where a
C++ test edits the default signature in memory, the port uses a named signature instead.
TF Serving's testdata SavedModels (half_plus_two TF1 and TF2, counter, half_plus_two with
two versions) are copied from test/support/tfs_testdata into a temporary directory; the TF1
half_plus_two gets the two signatures that TensorFlow's cc/saved_model/testdata/half_plus_two
has on top of TF Serving's copy of it (classify_x2_to_y3) and that the tests set in memory
("not/supported/method").

Not ported, as they have no gRPC counterpart: PredictImplTest.ModelMissingSignatures (it
returns early in open-source TF Serving, and its model is a SessionBundle export), the
ThreadPoolOptions tests (caller-supplied thread pools) and the ModelSpecOverride tests (C++
entry points the gRPC services never call with an override).

Beyond the TEST cases, test_check_order pins the order of classifier.cc's and regressor.cc's
own signature and output checks.

Two servers run every model: one as tensorflow_model_server runs by default, one with
--enable_signature_method_name_check (the C++ tests' SetSignatureMethodNameCheckFeature).
Expected codes, message texts and values are the C++ tests' own.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from tensorflow.core.example import example_pb2
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from conftest import model_server
from tfs_testdata_dir import TESTDATA

CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
PREDICT = "tensorflow/serving/predict"
UNSUPPORTED = "not/supported/method"
INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND

# ----- models ------------------------------------------------------------------------------


def _save(path: Path, build: Callable[[Any, Any], dict[str, Any]]) -> None:
    """A TF1 SavedModel at `path`: build(tf1, serialized) returns its SignatureDefs, given the
    string placeholder "input" the fake sessions read serialized Examples from."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    with tf.Graph().as_default(), tf1.Session() as sess:
        serialized = tf1.placeholder(tf.string, [None], name="input")
        signatures = build(tf1, serialized)
        builder = tf1.saved_model.builder.SavedModelBuilder(str(path))
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map=signatures)
        builder.save()


def _sig(tf1: Any, method: str, inputs: dict[str, Any], outputs: dict[str, Any]) -> Any:
    info = tf1.saved_model.utils.build_tensor_info
    return tf1.saved_model.signature_def_utils.build_signature_def(
        {k: info(v) for k, v in inputs.items()}, {k: info(v) for k, v in outputs.items()}, method
    )


def _failing(tf1: Any, tensor: Any) -> Any:
    """`tensor`, after an assertion that fails with the MockSession's message."""
    check = tf1.debugging.Assert(tf1.constant(False), ["Run totally failed"])
    with tf1.control_dependencies([check]):
        return tf1.identity(tensor)


def _classifier_signatures(tf1: Any, serialized: Any) -> dict[str, Any]:
    """classifier_test.cc's FakeSession and its signatures, plus the MockSession outputs."""
    parsed = tf1.io.parse_example(
        serialized,
        {"class": tf1.io.VarLenFeature(tf1.string), "score": tf1.io.VarLenFeature(tf1.float32)},
    )
    classes = tf1.sparse.to_dense(parsed["class"], default_value="", name="output")
    scores = tf1.sparse.to_dense(parsed["score"], name="score")
    plus_one = tf1.add(scores, 1.0, name="outputPlusOne")
    improper = tf1.zeros(tf1.concat([tf1.shape(scores), [10]], 0), name="ImproperlySizedScores")
    inputs = {"inputs": serialized}

    def classify(classes_: Any, scores_: Any, method: str = CLASSIFY) -> Any:
        outputs = {"classes": classes_, "scores": scores_}
        return _sig(tf1, method, inputs, {k: v for k, v in outputs.items() if v is not None})

    two_by_two = tf1.constant([["a", "b"], ["c", "d"]])
    return {
        "serving_default": classify(classes, scores),
        "output_plus_one": classify(classes, plus_one),
        "invalid_regression_signature": _sig(tf1, REGRESS, inputs, {"outputs": plus_one}),
        "ImproperlySizedScoresSignature": classify(classes, improper),
        "classes_only": classify(classes, None),
        "scores_only": classify(None, scores),
        "missing_classification_signature": meta_graph_pb2.SignatureDef(),
        "runs_fails": classify(classes, _failing(tf1, scores)),
        "classes_batch_size_1": classify(tf1.constant([["a", "b"]]), tf1.zeros([2, 2])),
        "classes_float": classify(tf1.zeros([2, 2]), tf1.zeros([2, 2])),
        "scores_batch_size_1": classify(two_by_two, tf1.zeros([1, 2])),
        "scores_string": classify(two_by_two, two_by_two),
        "scores_2_by_3": classify(two_by_two, tf1.zeros([2, 3])),
        "unsupported_method": classify(classes, scores, UNSUPPORTED),
        "empty_method": classify(classes, scores, ""),
        "x_to_three_outputs": _sig(
            tf1, CLASSIFY, {"x": serialized}, {"classes": classes, "scores": scores, "s": scores}
        ),
    }


def _regressor_signatures(tf1: Any, serialized: Any) -> dict[str, Any]:
    """regressor_test.cc's FakeSession and its signatures, the MockSession outputs, and
    "abc" (util_test.cc's examples A, B, C): a + 100 b + 10000 c."""
    output = tf1.io.parse_example(serialized, {"output": tf1.io.FixedLenFeature([], tf1.float32)})
    output = tf1.identity(output["output"], name="output")
    plus_one = tf1.expand_dims(output + 1.0, 1, name="outputPlusOne")
    improper = tf1.zeros(tf1.stack([tf1.shape(output)[0], 1, 10]), name="ImproperlySizedOutput")
    abc = tf1.io.parse_example(
        serialized, {k: tf1.io.FixedLenFeature([], tf1.int64, default_value=0) for k in "abc"}
    )
    weighted = sum(
        tf1.cast(abc[k], tf1.float32) * w for k, w in zip("abc", (1, 100, 10000), strict=True)
    )
    inputs = {"inputs": serialized}

    def regress(outputs: Any, method: str = REGRESS) -> Any:
        return _sig(tf1, method, inputs, {"outputs": outputs})

    return {
        "serving_default": regress(output),
        "output_plus_one": regress(plus_one),
        "invalid_classification_signature": _sig(tf1, CLASSIFY, inputs, {"classes": plus_one}),
        "ImproperlySizedOutputSignature": regress(improper),
        "missing_regression_signature": meta_graph_pb2.SignatureDef(),
        "runs_fails": regress(_failing(tf1, output)),
        "output_size_2": regress(tf1.zeros([2])),
        "string_output": regress(tf1.constant(["a"])),
        "unsupported_method": regress(output, UNSUPPORTED),
        "empty_method": regress(output, ""),
        "abc": regress(weighted),
        "x_to_two_outputs": _sig(tf1, REGRESS, {"x": serialized}, {"outputs": output, "o": output}),
        "string_output_size_2": regress(tf1.constant(["a", "b"])),
    }


def _extract(name: str, dest: Path) -> Path:
    """A copy of TF Serving's testdata/<name> (its version directories) as `dest/<name>`."""
    return Path(shutil.copytree(TESTDATA / name, dest / name))


def _with_extra_signatures(base: Path) -> Path:
    """saved_model_half_plus_two_cpu with what TensorFlow's half_plus_two has on top
    (classify_x2_to_y3) and the method name predict_util_test.cc sets in memory."""
    path = base / "00000123" / "saved_model.pb"
    model = saved_model_pb2.SavedModel.FromString(path.read_bytes())
    signatures = model.meta_graphs[0].signature_def
    x2_to_y3 = signatures["regress_x2_to_y3"]
    classify = signatures["classify_x2_to_y3"]
    classify.method_name = CLASSIFY
    classify.inputs["inputs"].CopyFrom(x2_to_y3.inputs["inputs"])
    classify.outputs["scores"].CopyFrom(x2_to_y3.outputs["outputs"])
    signatures["not_supported_method"].CopyFrom(signatures["serving_default"])
    signatures["not_supported_method"].method_name = UNSUPPORTED
    path.write_bytes(model.SerializeToString())
    return base


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """Model name -> base path."""
    root = tmp_path_factory.mktemp("conformance-models")
    _save(root / "classifier" / "1", _classifier_signatures)
    _save(root / "regressor" / "1", _regressor_signatures)
    testdata = root / "testdata"
    testdata.mkdir()
    return {
        "classifier": root / "classifier",
        "regressor": root / "regressor",
        "test_model": _with_extra_signatures(_extract("saved_model_half_plus_two_cpu", testdata)),
        "test_model_tf2": _extract("saved_model_half_plus_two_tf2_cpu", testdata),
        "counter": _extract("saved_model_counter", testdata),
        "saved_model_half_plus_two_2_versions": _extract(
            "saved_model_half_plus_two_2_versions", testdata
        ),
    }


# ----- servers -----------------------------------------------------------------------------


@dataclass
class Stubs:
    predictions: Any  # PredictionServiceStub
    models: Any  # ModelServiceStub


def _config(models: dict[str, Path]) -> str:
    entries = []
    for name, base in models.items():
        policy = ""
        if name == "saved_model_half_plus_two_2_versions":
            policy = "model_version_policy { specific { versions: 123 versions: 124 } }"
        entries.append(
            f"config {{ name: '{name}' base_path: '{base}' model_platform: 'tensorflow' {policy} }}"
        )
    return "model_config_list {\n" + "\n".join(entries) + "\n}\n"


@pytest.fixture(scope="module")
def servers(models, tmp_path_factory) -> Iterator[Callable[[bool], Stubs]]:
    """servers(method_name_check): stubs of a server running every model, started on first
    use, with or without --enable_signature_method_name_check; all stopped at the end."""
    started: dict[bool, Stubs] = {}
    with contextlib.ExitStack() as stack:

        def get(check: bool) -> Stubs:
            if check not in started:
                tmp = tmp_path_factory.mktemp(f"conformance-check-{check}")
                (tmp / "models.config").write_text(_config(models))
                args = [f"--model_config_file={tmp / 'models.config'}"]
                if check:
                    args.append("--enable_signature_method_name_check")
                server = stack.enter_context(model_server(args, tmp / "server.log"))
                assert server.wait_ready(list(models), 180), server.log()[-5000:]
                channel = stack.enter_context(grpc.insecure_channel(server.grpc_target))
                started[check] = Stubs(
                    prediction_service_pb2_grpc.PredictionServiceStub(channel),
                    model_service_pb2_grpc.ModelServiceStub(channel),
                )
            return started[check]

        yield get


@pytest.fixture(params=[False, True], ids=["no_method_check", "method_check"])
def method_name_check(request) -> bool:
    """TEST_P's bool parameter: SetSignatureMethodNameCheckFeature(GetParam())."""
    return request.param


@pytest.fixture
def stubs(servers, method_name_check) -> Stubs:
    return servers(method_name_check)


@pytest.fixture
def default_stubs(servers) -> Stubs:
    """The server as tensorflow_model_server runs by default (no method-name check)."""
    return servers(False)


def _failure(method: Callable[..., Any], request: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        method(request, timeout=30)
    return info.value.code(), info.value.details()


def _fails_as(method: Callable[..., Any], request: Any, code: Any, text: str | None) -> None:
    """The call fails with `code` (None: any) and a message holding `text` (None: any)."""
    got_code, message = _failure(method, request)
    assert code is None or got_code == code, message
    assert text is None or text in message


# ----- requests ----------------------------------------------------------------------------

Pairs = Sequence[tuple[str, float]]


def class_example(pairs: Pairs) -> example_pb2.Example:
    """classifier_test.cc's example(): the "class" bytes and "score" float features."""
    example = example_pb2.Example()
    features = example.features.feature
    for label, score in pairs:
        features["class"].bytes_list.value.append(label.encode())
        features["score"].float_list.value.append(score)
    return example


def output_example(value: float) -> example_pb2.Example:
    """regressor_test.cc's example_with_output()."""
    example = example_pb2.Example()
    example.features.feature["output"].float_list.value.append(value)
    return example


def int_example(name: str, value: int) -> example_pb2.Example:
    """util_test.cc's example_A/B/C: one int64 feature."""
    example = example_pb2.Example()
    example.features.feature[name].int64_list.value.append(value)
    return example


A, B, C, C64 = (
    int_example("a", 11),
    int_example("b", 22),
    int_example("c", 33),
    int_example("c", 64),
)


@dataclass(frozen=True)
class Input:
    """A tensorflow.serving.Input: `kind` None (not set), "list" or "context"."""

    kind: str | None
    examples: tuple[example_pb2.Example, ...] = ()
    context: example_pb2.Example | None = None

    def fill(self, request: Any) -> Any:
        if self.kind == "list":
            request.input.example_list.SetInParent()
            request.input.example_list.examples.extend(self.examples)
        elif self.kind == "context":
            request.input.example_list_with_context.SetInParent()
            request.input.example_list_with_context.examples.extend(self.examples)
            if self.context is not None:
                request.input.example_list_with_context.context.CopyFrom(self.context)
        return request


def listed(*examples: example_pb2.Example) -> Input:
    return Input("list", examples)


def with_context(context: example_pb2.Example | None, *examples: example_pb2.Example) -> Input:
    return Input("context", examples, context)


EMPTY = example_pb2.Example()
TWO_CLASSIFIED = listed(
    class_example([("dos", 2), ("uno", 1)]), class_example([("cuatro", 4), ("tres", 3)])
)
TWO_OUTPUTS = listed(output_example(2.0), output_example(3.0))


def classify_request(model: str, signature: str, given: Input) -> Any:
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name, request.model_spec.signature_name = model, signature
    return given.fill(request)


def regress_request(model: str, signature: str, given: Input) -> Any:
    request = regression_pb2.RegressionRequest()
    request.model_spec.name, request.model_spec.signature_name = model, signature
    return given.fill(request)


def classes_of(response: Any) -> list[list[tuple[str, float]]]:
    return [
        [(c.label, round(c.score, 5)) for c in row.classes]
        for row in response.result.classifications
    ]


# ----- classifier_test.cc ------------------------------------------------------------------

CLASSIFY_OK = [
    pytest.param("", TWO_CLASSIFIED, [[("dos", 2), ("uno", 1)], [("cuatro", 4), ("tres", 3)]],
                 id="ExampleList"),
    pytest.param("", with_context(class_example([("dos", 2), ("uno", 1)]), EMPTY, EMPTY),
                 [[("dos", 2), ("uno", 1)], [("dos", 2), ("uno", 1)]],
                 id="ExampleListWithContext"),
    pytest.param("", with_context(class_example([("uno", 1), ("dos", 2)]), EMPTY,
                                  class_example([("tres", 3), ("cuatro", 4)])),
                 [[("uno", 1), ("dos", 2)], [("tres", 3), ("cuatro", 4)]],
                 id="ExampleListWithContext_DuplicateFeatures"),
    pytest.param("classes_only", TWO_CLASSIFIED,
                 [[("dos", 0), ("uno", 0)], [("cuatro", 0), ("tres", 0)]], id="ClassesOnly"),
    pytest.param("scores_only", TWO_CLASSIFIED, [[("", 2), ("", 1)], [("", 4), ("", 3)]],
                 id="ScoresOnly"),
    pytest.param("scores_only", listed(class_example([("minus", -1), ("zero", 0), ("one", 1)])),
                 [[("", -1), ("", 0), ("", 1)]], id="ZeroScoresArePresent"),
    pytest.param("output_plus_one", TWO_CLASSIFIED,
                 [[("dos", 3), ("uno", 2)], [("cuatro", 5), ("tres", 4)]],
                 id="ValidNamedSignature"),
]  # fmt: skip


@pytest.mark.parametrize(("signature", "given", "expected"), CLASSIFY_OK)
def test_classifier(stubs, signature, given, expected) -> None:
    response = stubs.predictions.Classify(
        classify_request("classifier", signature, given), timeout=30
    )
    assert classes_of(response) == expected


# (signature, input, code or None: any, text the message contains or None)
CLASSIFY_ERRORS = [
    pytest.param("invalid_regression_signature", TWO_CLASSIFIED, INVALID, None,
                 id="InvalidNamedSignature"),
    pytest.param("ImproperlySizedScoresSignature", TWO_CLASSIFIED, INVALID, None,
                 id="MalformedScores"),
    pytest.param("missing_classification_signature", listed(class_example([("dos", 2)])),
                 INVALID, None, id="MissingClassificationSignature"),
    pytest.param("", Input(None), INVALID, "Input is empty", id="EmptyInput"),
    pytest.param("", listed(), INVALID, "Input is empty", id="EmptyExampleList"),
    pytest.param("", with_context(class_example([("dos", 2)])), INVALID, "Input is empty",
                 id="EmptyExampleListWithContext"),
    pytest.param("runs_fails", listed(class_example([("dos", 2)])), None, "Run totally failed",
                 id="RunsFails"),
    pytest.param("classes_batch_size_1", TWO_CLASSIFIED, INVALID, "batch size",
                 id="ClassesIncorrectTensorBatchSize"),
    pytest.param("classes_float", TWO_CLASSIFIED, INVALID,
                 "Expected classes Tensor of DT_STRING", id="ClassesIncorrectTensorType"),
    pytest.param("scores_batch_size_1", TWO_CLASSIFIED, INVALID, "batch size",
                 id="ScoresIncorrectTensorBatchSize"),
    pytest.param("scores_string", TWO_CLASSIFIED, INVALID, "Expected scores Tensor of DT_FLOAT",
                 id="ScoresIncorrectTensorType"),
    pytest.param("scores_2_by_3", TWO_CLASSIFIED, INVALID,
                 "Tensors class and score should match in dim_size(1). Got 2 vs. 3",
                 id="MismatchedNumberOfTensorClasses"),
]  # fmt: skip


@pytest.mark.parametrize(("signature", "given", "code", "text"), CLASSIFY_ERRORS)
def test_classifier_errors(stubs, signature, given, code, text) -> None:
    _fails_as(
        stubs.predictions.Classify, classify_request("classifier", signature, given), code, text
    )


@pytest.mark.parametrize("signature", ["unsupported_method", "empty_method"])
def test_classifier_MethodNameCheck(stubs, method_name_check, signature) -> None:
    """A classify signature whose method_name is not CLASSIFY works only without the check."""
    request = classify_request("classifier", signature, listed(class_example([("dos", 2)])))
    if method_name_check:
        assert _failure(stubs.predictions.Classify, request)[0] == INVALID
    else:
        assert classes_of(stubs.predictions.Classify(request, timeout=30)) == [[("dos", 2)]]


# ----- regressor_test.cc -------------------------------------------------------------------

REGRESS_OK = [
    pytest.param("", TWO_OUTPUTS, [2.0, 3.0], id="BasicExampleList"),
    pytest.param("", with_context(output_example(3.0), EMPTY, EMPTY), [3.0, 3.0],
                 id="BasicExampleListWithContext"),
    pytest.param("output_plus_one", TWO_OUTPUTS, [3.0, 4.0], id="ValidNamedSignature"),
]  # fmt: skip


@pytest.mark.parametrize(("signature", "given", "expected"), REGRESS_OK)
def test_regressor(stubs, signature, given, expected) -> None:
    response = stubs.predictions.Regress(regress_request("regressor", signature, given), timeout=30)
    assert [r.value for r in response.result.regressions] == expected


def _class_uno() -> Input:
    example = example_pb2.Example()
    example.features.feature["class"].bytes_list.value.append(b"uno")
    return listed(example)


REGRESS_ERRORS = [
    pytest.param("invalid_classification_signature", TWO_OUTPUTS, INVALID, None,
                 id="InvalidNamedSignature"),
    pytest.param("ImproperlySizedOutputSignature", TWO_OUTPUTS, INVALID, None,
                 id="MalformedOutputs"),
    pytest.param("", Input(None), INVALID, "Input is empty", id="EmptyInput"),
    pytest.param("", listed(), INVALID, "Input is empty", id="EmptyExampleList"),
    pytest.param("", with_context(output_example(3.0)), INVALID, "Input is empty",
                 id="EmptyExampleListWithContext"),
    pytest.param("runs_fails", listed(output_example(2.0)), None, "Run totally failed",
                 id="RunsFails"),
    pytest.param("output_size_2", listed(output_example(2.0)), INVALID, "output batch size",
                 id="UnexpectedOutputTensorSize"),
    pytest.param("string_output", listed(output_example(2.0)), INVALID,
                 "Expected output Tensor of DT_FLOAT", id="UnexpectedOutputTensorType"),
    pytest.param("missing_regression_signature", _class_uno(), INVALID, None,
                 id="MissingRegressionSignature"),
]  # fmt: skip


@pytest.mark.parametrize(("signature", "given", "code", "text"), REGRESS_ERRORS)
def test_regressor_errors(stubs, signature, given, code, text) -> None:
    _fails_as(stubs.predictions.Regress, regress_request("regressor", signature, given), code, text)


@pytest.mark.parametrize("signature", ["unsupported_method", "empty_method"])
def test_regressor_MethodNameCheck(stubs, method_name_check, signature) -> None:
    """A regress signature whose method_name is not REGRESS works only without the check."""
    request = regress_request("regressor", signature, listed(output_example(2.0)))
    if method_name_check:
        assert _failure(stubs.predictions.Regress, request)[0] == INVALID
    else:
        response = stubs.predictions.Regress(request, timeout=30)
        assert [r.value for r in response.result.regressions] == [2.0]


# Not TEST cases: the order of classifier.cc's and regressor.cc's own checks, where a
# signature or an output breaks two rules (the number of outputs before the input's name;
# an output's batch size before its type).
CHECK_ORDER = [
    pytest.param(stub_method, model, signature, text, id=f"{model}-{signature}")
    for stub_method, model, signature, text in (
        ("Classify", "classifier", "x_to_three_outputs",
         "Expected one or two output Tensors, found 3"),
        ("Regress", "regressor", "x_to_two_outputs", "Expected one output Tensor."),
        ("Regress", "regressor", "string_output_size_2",
         "Input batch size did not match output batch size: 1 vs. 2"),
    )
]  # fmt: skip


@pytest.mark.parametrize(("stub_method", "model", "signature", "text"), CHECK_ORDER)
def test_check_order(stubs, stub_method, model, signature, text) -> None:
    make = classify_request if stub_method == "Classify" else regress_request
    example = class_example([("dos", 2)]) if model == "classifier" else output_example(2.0)
    request = make(model, signature, listed(example))
    assert _failure(getattr(stubs.predictions, stub_method), request) == (INVALID, text)


# ----- predict_util_test.cc ----------------------------------------------------------------


def predict_request(
    signature: str = "", inputs: dict[str, tensor_pb2.TensorProto] | None = None
) -> predict_pb2.PredictRequest:
    """PredictImplTest's request: test_model version 123."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "test_model"
    request.model_spec.version.value = 123
    request.model_spec.signature_name = signature
    for alias, proto in (inputs or {}).items():
        request.inputs[alias].CopyFrom(proto)
    return request


def scalar(value: float) -> tensor_pb2.TensorProto:
    """A float TensorProto with float_val and no shape, as the C++ tests build them."""
    return tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[value])


def expected_predict(
    signature: str, outputs: dict[str, float], name: str = "test_model"
) -> predict_pb2.PredictResponse:
    """The C++ tests' expected response: scalar float outputs (float_val, empty shape)."""
    response = predict_pb2.PredictResponse()
    response.model_spec.name = name
    response.model_spec.version.value = 123
    response.model_spec.signature_name = signature
    for alias, value in outputs.items():
        out = response.outputs[alias]
        out.dtype = types_pb2.DT_FLOAT
        out.tensor_shape.SetInParent()
        out.float_val.append(value)
    return response


def _no_model_spec() -> predict_pb2.PredictRequest:
    return predict_pb2.PredictRequest()


def _nameless_model_spec() -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.SetInParent()
    return request


def _wrong_model_name() -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "test"
    return request


@pytest.mark.parametrize(
    ("make", "code"),
    [
        pytest.param(_no_model_spec, INVALID, id="empty_request"),
        pytest.param(_nameless_model_spec, INVALID, id="no_model_name"),
        # The C++ test expects INVALID_ARGUMENT here only because its CallPredict always
        # serves test_model (and the request has no inputs); over gRPC the name is looked up,
        # and an unknown model is NOT_FOUND (GetModelMetadataImplTest's same case).
        pytest.param(_wrong_model_name, NOT_FOUND, id="wrong_model_name"),
    ],
)
def test_predict_MissingOrEmptyModelSpec(default_stubs, make, code) -> None:
    assert _failure(default_stubs.predictions.Predict, make())[0] == code


def test_predict_EmptyInputList(default_stubs) -> None:
    assert _failure(default_stubs.predictions.Predict, predict_request())[0] == INVALID


def test_predict_InputTensorsDontMatchModelSpecInputs(default_stubs) -> None:
    text = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[b"any_value"])
    text.tensor_shape.dim.add(size=1)
    number = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[1.0])
    number.tensor_shape.dim.add(size=1)
    request = predict_request(inputs={"unknown_key1": text, "unknown_key2": number})
    code, message = _failure(default_stubs.predictions.Predict, request)
    assert code == INVALID
    assert "Sent extra: {unknown_key1,unknown_key2}" in message
    assert "Missing but required: {x}" in message


def test_predict_PredictionInvalidTensor(default_stubs) -> None:
    flag = tensor_pb2.TensorProto(dtype=types_pb2.DT_BOOL, bool_val=[True])
    code, message = _failure(default_stubs.predictions.Predict, predict_request(inputs={"x": flag}))
    assert code == INVALID
    assert "Expects arg[0] to be float but bool is provided" in message


def test_predict_OutputFiltersDontMatchModelSpecOutputs(default_stubs) -> None:
    request = predict_request(inputs={"x": scalar(2.0)})
    request.output_filter.append("output_filter")
    code, message = _failure(default_stubs.predictions.Predict, request)
    assert code == INVALID
    assert "output tensor alias not found in signature: output_filter" in message

    del request.output_filter[:]
    request.output_filter.append("y")
    default_stubs.predictions.Predict(request, timeout=30)

    request.output_filter.append("y")
    code, message = _failure(default_stubs.predictions.Predict, request)
    assert code == INVALID
    assert "duplicate output tensor alias: y" in message


def test_predict_InputTensorsHaveWrongType(default_stubs) -> None:
    text = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[b"any_value"])
    text.tensor_shape.dim.add(size=1)
    request = predict_request(inputs={"x": text})
    request.output_filter.append("y")
    code, message = _failure(default_stubs.predictions.Predict, request)
    assert code == INVALID
    assert "to be float but string is provided" in message


@pytest.mark.parametrize(
    ("signature", "alias", "expected"),
    [
        pytest.param("", "x", expected_predict("serving_default", {"y": 3.0}),
                     id="PredictionSuccess"),
        pytest.param("regress_x2_to_y3", "inputs",
                     expected_predict("regress_x2_to_y3", {"outputs": 4.0}),
                     id="PredictionWithNamedRegressionSignature"),
        pytest.param("classify_x2_to_y3", "inputs",
                     expected_predict("classify_x2_to_y3", {"scores": 4.0}),
                     id="PredictionWithNamedClassificationSignature"),
    ],
)  # fmt: skip
def test_predict_success(default_stubs, signature, alias, expected) -> None:
    request = predict_request(signature, {alias: scalar(2.0)})
    assert default_stubs.predictions.Predict(request, timeout=30) == expected


def test_predict_PredictionWithCustomizedSignatures(default_stubs) -> None:
    """The counter model: get, incr, reset, incr (output filter), incr_counter_by(3)."""
    request = predict_request()
    request.model_spec.name = "counter"
    steps = [
        ("get_counter", (), None, 0.0),
        ("incr_counter", (), None, 1.0),
        ("reset_counter", (), None, 0.0),
        ("incr_counter", ("output",), None, 1.0),
        ("incr_counter_by", (), 3.0, 4.0),
    ]
    for signature, output_filter, delta, value in steps:
        request.model_spec.signature_name = signature
        del request.output_filter[:]
        request.output_filter.extend(output_filter)
        if delta is not None:
            request.inputs["delta"].CopyFrom(scalar(delta))
        response = default_stubs.predictions.Predict(request, timeout=30)
        assert response == expected_predict(signature, {"output": value}, "counter"), signature


@pytest.mark.parametrize("signature", ["", "not_supported_method"])
def test_predict_MethodNameCheck(stubs, method_name_check, signature) -> None:
    """Predict works on any method name without the check; with it, only predict, classify
    and regress signatures work."""
    request = predict_request(signature, {"x": scalar(2.0)})
    if method_name_check and signature:
        assert _failure(stubs.predictions.Predict, request)[0] == grpc.StatusCode.INTERNAL
    else:
        response = stubs.predictions.Predict(request, timeout=30)
        assert list(response.outputs["y"].float_val) == [3.0]


# ----- multi_inference_test.cc -------------------------------------------------------------


@pytest.fixture(params=["tf1", "tf2"])
def multi_inference(request, servers) -> tuple[Any, str]:
    """(stub, model): TF1 half_plus_two with the method-name check on, TF2 without
    (SetSignatureMethodNameCheckFeature(UseTf1Model()))."""
    tf1 = request.param == "tf1"
    return servers(tf1).predictions, "test_model" if tf1 else "test_model_tf2"


def multi_request(
    model: str, tasks: Sequence[tuple[str, str]], x: float | None = 2.0
) -> inference_pb2.MultiInferenceRequest:
    """AddInput({{"x", x}}) (none when x is None) and PopulateTask(signature, method) each."""
    request = inference_pb2.MultiInferenceRequest()
    if x is not None:
        example = request.input.example_list.examples.add()
        example.features.feature["x"].float_list.value.append(x)
    for signature, method in tasks:
        task = request.tasks.add(method_name=method)
        task.model_spec.name, task.model_spec.signature_name = model, signature
    return request


def expected_multi(
    model: str, results: Sequence[tuple[str, str, float]]
) -> inference_pb2.MultiInferenceResponse:
    response = inference_pb2.MultiInferenceResponse()
    for signature, method, value in results:
        result = response.results.add()
        result.model_spec.name, result.model_spec.signature_name = model, signature
        result.model_spec.version.value = 123
        if method == CLASSIFY:
            result.classification_result.classifications.add().classes.add(score=value)
        else:
            result.regression_result.regressions.add(value=value)
    return response


MULTI_ERRORS = [
    pytest.param([("regress_x_to_y", REGRESS)], None, INVALID, "Input is empty",
                 id="MissingInputTest"),
    pytest.param([("ThisSignatureDoesNotExist", REGRESS)], 2.0, INVALID, "signature not found",
                 id="UndefinedSignatureTest"),
    pytest.param([("regress_x_to_y", REGRESS), ("regress_x_to_y", REGRESS)], 2.0, INVALID,
                 "Duplicate evaluation of signature: regress_x_to_y",
                 id="EvaluateDuplicateSignaturesTest"),
    pytest.param([("serving_default", PREDICT)], 2.0, grpc.StatusCode.UNIMPLEMENTED,
                 "Unsupported signature", id="UsupportedSignatureTypeTest"),
]  # fmt: skip


@pytest.mark.parametrize(("tasks", "x", "code", "text"), MULTI_ERRORS)
def test_multi_inference_errors(multi_inference, tasks, x, code, text) -> None:
    stub, model = multi_inference
    got_code, message = _failure(stub.MultiInference, multi_request(model, tasks, x))
    assert (got_code, text in message) == (code, True), message


def test_multi_inference_InconsistentModelSpecsInRequestTest(multi_inference) -> None:
    stub, model = multi_inference
    request = multi_request(model, [("regress_x_to_y", REGRESS)])
    task = request.tasks.add(method_name=REGRESS)
    task.model_spec.name, task.model_spec.signature_name = "ModelDoesNotExist", "regress_x_to_y"
    code, message = _failure(stub.MultiInference, request)
    assert code == INVALID
    assert "must access the same model name" in message


MULTI_OK = [
    pytest.param([("regress_x_to_y", REGRESS, 3.0)], id="ValidSingleSignatureTest"),
    pytest.param([("regress_x_to_y", REGRESS, 3.0), ("regress_x_to_y2", REGRESS, 4.0)],
                 id="MultipleValidRegressSignaturesTest"),
    pytest.param([("regress_x_to_y", REGRESS, 3.0), ("classify_x_to_y", CLASSIFY, 3.0)],
                 id="RegressAndClassifySignaturesTest"),
]  # fmt: skip


@pytest.mark.parametrize("results", MULTI_OK)
def test_multi_inference(multi_inference, results) -> None:
    stub, model = multi_inference
    request = multi_request(model, [(signature, method) for signature, method, _ in results])
    assert stub.MultiInference(request, timeout=30) == expected_multi(model, results)


# ----- get_model_metadata_impl_test.cc -----------------------------------------------------


def with_model_spec(request: Any, name: str | None, version: int | None) -> Any:
    """`request` with a model_spec of `name` (and `version`, when given) when `name` is given."""
    if name is not None:
        request.model_spec.SetInParent()
        request.model_spec.name = name
        if version is not None:
            request.model_spec.version.value = version
    return request


def metadata_request(
    fields: Sequence[str], name: str | None = None, version: int | None = None
) -> get_model_metadata_pb2.GetModelMetadataRequest:
    """A request with these metadata_fields; a model_spec only when `name` is given."""
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=list(fields))
    return with_model_spec(request, name, version)


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        pytest.param(metadata_request([]), INVALID, id="EmptyOrInvalidMetadataFieldList-empty"),
        pytest.param(metadata_request(["some_stuff"]), INVALID,
                     id="EmptyOrInvalidMetadataFieldList-some_stuff"),
        pytest.param(metadata_request(["signature_def"]), INVALID,
                     id="MissingOrEmptyModelSpec-missing"),
        pytest.param(metadata_request(["signature_def"], ""), INVALID,
                     id="MissingOrEmptyModelSpec-no_name"),
        pytest.param(metadata_request(["signature_def"], "test"), NOT_FOUND,
                     id="MissingOrEmptyModelSpec-wrong_name"),
    ],
)  # fmt: skip
def test_get_model_metadata_errors(default_stubs, request_, code) -> None:
    assert _failure(default_stubs.predictions.GetModelMetadata, request_)[0] == code


def test_get_model_metadata_ReturnsSignaturesForValidModel(default_stubs, models) -> None:
    request = metadata_request(["signature_def"], "test_model", 123)
    response = default_stubs.predictions.GetModelMetadata(request, timeout=30)
    assert response.model_spec == request.model_spec
    assert len(response.metadata) == 1
    received = get_model_metadata_pb2.SignatureDefMap()
    assert response.metadata["signature_def"].Unpack(received)
    saved = saved_model_pb2.SavedModel.FromString(
        (models["test_model"] / "00000123" / "saved_model.pb").read_bytes()
    )
    expected = saved.meta_graphs[0].signature_def
    assert len(received.signature_def) == len(expected)
    for key in ("regress_x_to_y", "serving_default"):
        assert received.signature_def[key] == expected[key]


# ----- get_model_status_impl_test.cc -------------------------------------------------------

TWO_VERSIONS = "saved_model_half_plus_two_2_versions"


def status_request(
    name: str | None = None, version: int | None = None
) -> get_model_status_pb2.GetModelStatusRequest:
    return with_model_spec(get_model_status_pb2.GetModelStatusRequest(), name, version)


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        pytest.param(status_request(), INVALID, id="MissingOrEmptyModelSpecFailure"),
        pytest.param(status_request("nonexistent_model"), NOT_FOUND,
                     id="InvalidModelNameFailure"),
        pytest.param(status_request(TWO_VERSIONS, 125), NOT_FOUND,
                     id="InvalidModelVersionFailure"),
    ],
)  # fmt: skip
def test_get_model_status_errors(default_stubs, request_, code) -> None:
    assert _failure(default_stubs.models.GetModelStatus, request_)[0] == code


@pytest.mark.parametrize(
    ("version", "versions"),
    [
        pytest.param(None, {123, 124}, id="AllVersionsSuccess"),
        pytest.param(123, {123}, id="SingleVersionSuccess"),
    ],
)
def test_get_model_status(default_stubs, version, versions) -> None:
    response = default_stubs.models.GetModelStatus(
        status_request(TWO_VERSIONS, version), timeout=30
    )
    statuses = response.model_version_status
    assert {s.version for s in statuses} == versions and len(statuses) == len(versions)
    assert [(s.status.error_code, s.status.error_message) for s in statuses] == [(0, "")] * len(
        versions
    )


# ----- util_test.cc ------------------------------------------------------------------------
# InputUtilTest checks the serialized Example tensor InputToSerializedExampleTensor builds; over
# gRPC it shows in what a model parses from it: the regressor's "abc" signature answers
# a + 100 b + 10000 c for example_A (a: 11), example_B (b: 22) and example_C (c: 33 or 64).

INPUT_UTIL_OK = [
    pytest.param(listed(A, B), [11.0, 2200.0], id="ExampleList"),
    pytest.param(with_context(C, A, B), [330011.0, 332200.0], id="ExampleListWithContext"),
    pytest.param(with_context(C, A, C64), [330011.0, 640000.0],
                 id="ExampleListWithOverridingContext"),
    pytest.param(with_context(None, A, B), [11.0, 2200.0], id="ExampleListWithContext_NoContext"),
]  # fmt: skip


@pytest.mark.parametrize(("given", "expected"), INPUT_UTIL_OK)
def test_input_util(default_stubs, given, expected) -> None:
    response = default_stubs.predictions.Regress(
        regress_request("regressor", "abc", given), timeout=30
    )
    assert [r.value for r in response.result.regressions] == expected


@pytest.mark.parametrize(
    "given",
    [
        pytest.param(Input(None), id="Empty_KindNotSet"),
        pytest.param(listed(), id="Empty_ExampleList"),
        pytest.param(with_context(None), id="Empty_ExampleListWithContext"),
        pytest.param(with_context(C), id="ExampleListWithContext_OnlyContext"),
    ],
)
def test_input_util_empty(default_stubs, given) -> None:
    code, message = _failure(
        default_stubs.predictions.Regress, regress_request("regressor", "abc", given)
    )
    assert code == INVALID and "Input is empty" in message


# ModelSpecTest: MakeModelSpec fills the response's model_spec of Classify, Regress and
# MultiInference: the name, the version, and the signature name, "serving_default" when the
# request left it empty.
@pytest.mark.parametrize(
    ("signature", "expected"),
    [
        pytest.param("", "serving_default", id="EmptySignature"),
        pytest.param("output_plus_one", "output_plus_one", id="AllOptionalSet"),
    ],
)
def test_model_spec(default_stubs, signature, expected) -> None:
    stub = default_stubs.predictions
    classified = stub.Classify(
        classify_request("classifier", signature, TWO_CLASSIFIED), timeout=30
    )
    regressed = stub.Regress(regress_request("regressor", signature, TWO_OUTPUTS), timeout=30)
    multi_inference = multi_request("regressor", [(signature, REGRESS)], None)
    TWO_OUTPUTS.fill(multi_inference)
    multi = stub.MultiInference(multi_inference, timeout=30)
    for response, name in (
        (classified, "classifier"),
        (regressed, "regressor"),
        (multi.results[0], "regressor"),
    ):
        spec = response.model_spec
        assert (spec.name, spec.version.value, spec.signature_name) == (name, 1, expected)
