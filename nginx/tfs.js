// The two things nginx does in njs (0.7.9): /invocations without user code, where a request that
// already is a TF Serving request, sent as JSON and wanting its JSON answer, goes straight to
// the model server on the path its custom attributes name (the AWS container's job, minus its
// conversions); and every answer nginx makes itself, a JSON error.
//
// Everything else is the Python service's: each contract rule has its one home there
// (sagemaker_serving/). This file converts nothing and decides nothing it could get wrong: any
// request it is not sure of (another format, another Accept, custom attributes it does not
// read as the service does) goes to the service, which answers it, errors included. The tables
// it reads (routing rules, media types, error messages) are written by serve from their Python
// homes into tfs_rules.js (sagemaker_serving/launcher/njs_tables.py).

import RULES from 'tfs_rules.js';

var NAME_RE = new RegExp(RULES.modelNamePattern);
var VERSION_RE = new RegExp(RULES.modelVersionPattern);
var ATTRIBUTES = RULES.attributesHeader;
var ATTRIBUTES_LOWER = ATTRIBUTES.toLowerCase();
// a body that starts as a TF Serving request does (its first key is a top-level key)
var TFS_REQUEST = new RegExp('^\\s*\\{\\s*"(' + RULES.requestKeys.join('|') + ')"\\s*:');

function lookup(list) {
    var t = Object.create(null);  // no prototype: `constructor` or `__proto__` are no entry
    for (var i = 0; i < list.length; i++) {
        t[list[i]] = true;
    }
    return t;
}

var JSON_TYPES = lookup(RULES.jsonTypes);
var JSON_ANSWERS = lookup(RULES.jsonAnswerTypes);  // Accept values whose answer is JSON
var METHODS = lookup(Object.keys(RULES.methods));

function mediaType(value) {
    return value ? value.split(';')[0].trim().toLowerCase() : '';
}

// '1' when the custom attributes header came more than once (nginx.conf refuses the request:
// nginx would pass on the first only), else '0'.
function repeatedAttributes(r) {
    var seen = 0;
    for (var i = 0; i < r.rawHeadersIn.length; i++) {
        if (r.rawHeadersIn[i][0].toLowerCase() === ATTRIBUTES_LOWER && ++seen > 1) {
            return '1';
        }
    }
    return '0';
}

// The model server's path for the request's custom attributes, or null when the service must
// judge them (a bad value: its 400 says why).
function tfsPath(r) {
    var model = r.variables.tfs_default_model;
    var version = null;
    var method = RULES.defaultMethod;
    var pairs = (r.headersIn[ATTRIBUTES] || '').split(',');
    for (var k = 0; k < pairs.length; k++) {
        var pair = pairs[k].trim();
        var eq = pair.indexOf('=');
        var key = (eq < 0 ? pair : pair.slice(0, eq)).trim();
        var value = eq < 0 ? '' : pair.slice(eq + 1).trim();
        if (key === RULES.modelNameKey) {
            model = value;
            if (!NAME_RE.test(value)) {
                return null;
            }
        } else if (key === RULES.modelVersionKey) {
            version = value;
            if (!VERSION_RE.test(value)) {
                return null;
            }
        } else if (key === RULES.methodKey) {
            method = value;
            if (!METHODS[value]) {
                return null;
            }
        }
    }
    return '/_tfs/v1/models/' + model + (version === null ? '' : '/versions/' + version)
        + ':' + method;
}

// POST /invocations without user code. A body nginx wrote to a temporary file (a chunked
// body's framing can push one under the limit out of the memory buffer) is not readable here:
// the service reads it.
function invocations(r) {
    var path = null;
    if (r.method === 'POST' && !r.variables.request_body_file
        && JSON_TYPES[mediaType(r.headersIn['Content-Type']) || RULES.defaultType]
        && JSON_ANSWERS[(r.headersIn.Accept || RULES.defaultType).trim().toLowerCase()]
        && TFS_REQUEST.test(r.requestText || '')) {
        path = tfsPath(r);
    }
    r.internalRedirect(path === null ? '@python_service' : path);
}

// nginx's own answers: {"error": message, "request_id": id} with the status its error page
// names (RULES.errors: status or name -> [status, message, Allow]).
function error(r) {
    var entry = RULES.errors[r.variables.error_name] || RULES.errors[RULES.unknownError];
    if (entry[2]) {
        r.headersOut.Allow = entry[2];
    }
    r.headersOut['Content-Type'] = RULES.json;
    var body = {error: entry[1], request_id: r.variables.req_id};
    r.return(entry[0], JSON.stringify(body) + '\n');
}

// A 200 JSON answer nginx.conf wrote in $json_answer (GET /execution-parameters).
function jsonAnswer(r) {
    r.headersOut['Content-Type'] = RULES.json;
    r.return(200, r.variables.json_answer + '\n');
}

export default {invocations, repeatedAttributes, error, jsonAnswer};
