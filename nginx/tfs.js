// The two things nginx does in njs (0.7.9): /invocations without user code, where a request that
// already is a TF Serving request, sent as JSON and wanting its JSON answer, goes straight to
// the model server on the path its custom attributes name, as do CSV rows of numbers wrapped
// as one (the AWS container's own job); and every answer nginx makes itself, a JSON error.
//
// Everything else is the Python service's: each contract rule has its one home there
// (sagemaker_serving/). This file decides nothing it could get wrong: any request it is not
// sure of (another format, another Accept, CSV with anything but plain numbers, custom
// attributes it does not read as the service does) goes to the service, which answers it,
// errors included; the conformance table holds the CSV rows' answers equal to the service's
// (formats/csv_rows.py, their rule's home). The tables it reads (routing rules, media types,
// error messages) are written by serve from their Python homes into tfs_rules.js
// (sagemaker_serving/launcher/nginx_config.py).

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
var UTF8 = lookup(RULES.utf8Charsets);
// what plain CSV number rows never hold: a character but digits, commas, points, minus signs
// and blanks (quotes, nan, inf, an exponent, text), a number that starts or ends with its point
// or has a leading zero (Python reads them, JSON does not), a carriage return that ends no line
// (Python's csv module ends a row there)
var NOT_PLAIN = /[^0-9,.\- \t\r\n]|(^|[^0-9])\.|\.([^0-9]|$)|(^|[^0-9.])0[0-9]|\r(?!\n)/m;

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
// judge them (a bad value: its 400 says why) or when `method` is given and another is named.
function tfsPath(r, only) {
    var model = r.variables.tfs_default_model;
    var version = null;
    var method = RULES.defaultMethod;
    var pairs = new RegExp(RULES.pairPattern, 'g');
    var header = r.headersIn[ATTRIBUTES] || '';
    var pair;
    while ((pair = pairs.exec(header)) !== null) {
        var key = pair[1];
        var value = pair[2].trim();
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
    if (only && method !== only) {
        return null;
    }
    return '/v1/models/' + model + (version === null ? '' : '/versions/' + version) + ':' + method;
}

// text/csv with no parameter but charset=utf-8
function plainCsv(header) {
    var params = header.split(';');
    if (params[0].trim().toLowerCase() !== RULES.csv) {
        return false;
    }
    for (var i = 1; i < params.length; i++) {
        var pair = params[i].split('=');
        if (pair.length !== 2 || pair[0].trim().toLowerCase() !== 'charset'
            || !UTF8[pair[1].trim().toLowerCase()]) {
            return false;
        }
    }
    return true;
}

// CSV rows of finite numbers, every row as wide as the first (one column: scalars), as
// {"instances": rows}, their text kept; null for anything else (NOT_PLAIN, what JSON.parse
// refuses, a ragged row: the service's).
function csvInstances(text) {
    if (!text || NOT_PLAIN.test(text)) {
        return null;
    }
    var lines = text.split('\n');
    var rows = [];
    for (var i = 0; i < lines.length; i++) {
        if (lines[i].length > 1 || lines[i].length === 1 && lines[i] !== '\r') {
            rows.push(lines[i]);  // JSON.parse takes a row's trailing \r as whitespace
        }
    }
    var scalar = rows.length > 0 && rows[0].indexOf(',') < 0;
    var items = scalar ? '[' + rows.join(',') + ']' : '[[' + rows.join('],[') + ']]';
    var values;
    try {
        values = JSON.parse(items);
    } catch (e) {
        return null;
    }
    if (!rows.length || values.length !== rows.length) {
        return null;
    }
    for (var r = 0; r < values.length; r++) {
        var row = scalar ? [values[r]] : values[r];
        if (!Array.isArray(row) || row.length !== (scalar ? 1 : values[0].length)) {
            return null;
        }
        for (var c = 0; c < row.length; c++) {
            if (typeof row[c] !== 'number' || !isFinite(row[c])) {
                return null;
            }
        }
    }
    return '{"' + RULES.methods[RULES.defaultMethod] + '":' + items + '}';
}

// POST /invocations without user code. A body nginx wrote to a temporary file (a chunked
// body's framing can push one under the limit out of the memory buffer) is not readable here:
// the service reads it.
function invocations(r) {
    var type = r.headersIn['Content-Type'] || RULES.defaultType;
    var path = null;
    if (r.method !== 'POST' || r.variables.request_body_file
        || !JSON_ANSWERS[(r.headersIn.Accept || RULES.defaultType).trim().toLowerCase()]) {
        path = null;
    } else if (JSON_TYPES[mediaType(type)] && TFS_REQUEST.test(r.requestText || '')) {
        path = tfsPath(r);
        path = path && '/_tfs' + path;
    } else if (plainCsv(type) && (path = tfsPath(r, RULES.defaultMethod))) {
        var instances = csvInstances(r.requestText);
        if (instances) {
            r.variables.tfs_instances = instances;  // the body /_tfs_instances/ sends
        }
        path = instances && '/_tfs_instances' + path;
    }
    r.internalRedirect(path ? path : '@python_service');
}

// nginx's own answers: {"error": message, "request_id": id} with the status its error page
// names (RULES.errors: status or name -> [status, message(, Allow)]).
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
