// The nginx fast path (njs 0.7.9): /ping and /invocations without user code.
//
// Requests are converted to TF Serving REST requests (JSON, JSON Lines, CSV of numbers in), sent
// to the model servers through the internal /_tfs/ location (upstream keep-alive), and converted
// back to what Accept asks for (JSON on one line, JSON Lines, CSV). Every error is a JSON body.
//
// njs frees nothing before a request ends, so every step here allocates in proportion to the
// body, with a small constant: no string built a character at a time, no regular expression or
// JSON.stringify per value. What needs more than that (CSV with quotes, text or special
// numbers, JSON that does not parse) is handed to the Python service, which applies the same
// format rules.

var NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/;
var VERSION_RE = /^[0-9]{1,19}$/;
var MAX_ECHO = 200;  // characters of a client's header echoed in an error message

// Lookup tables without a prototype: `constructor` or `__proto__` are not entries.
function table(entries) {
    var t = Object.create(null);
    for (var key in entries) {
        if (Object.prototype.hasOwnProperty.call(entries, key)) {
            t[key] = entries[key];
        }
    }
    return t;
}

function has(t, key) {
    return Object.prototype.hasOwnProperty.call(t, key);
}

var METHODS = table({predict: 'instances', classify: 'examples', regress: 'examples'});
// curl -d sends application/x-www-form-urlencoded: such bodies are read as JSON.
var JSON_TYPES = table({'application/json': 1, 'application/x-www-form-urlencoded': 1});
var JSONLINES_TYPES = table({
    'application/jsonlines': 1, 'application/jsons': 1, 'application/x-jsonlines': 1,
    'application/json-lines': 1, 'application/x-ndjson': 1, 'application/ndjson': 1
});
var CSV_TYPES = table({'text/csv': 1});
// Sentinel strings that stand for NaN/Infinity tokens of a model server answer while
// JSON.parse/stringify see them.
var SENTINEL = '\u0000tfs:';
var SENTINEL_JSON = '"\\u0000tfs:';  // the same, as JSON source text
var SENTINEL_RE = /"\\u0000tfs:(NaN|-?Infinity)"/g;

function HttpError(status, message) {
    this.status = status;
    this.message = message;
}

// Client bytes as valid UTF-8 (invalid sequences become U+FFFD), cut to `limit` characters.
function clean(text, limit) {
    var s = String(text);
    if (limit && s.length > limit) {
        s = s.slice(0, limit) + '...';
    }
    return Buffer.from(s).toString();
}

function quoted(text) {
    return JSON.stringify(clean(text, MAX_ECHO));
}

function sendJson(r, status, obj) {
    r.headersOut['Content-Type'] = 'application/json';
    r.return(status, JSON.stringify(obj) + '\n');
}

function sendError(r, status, message) {
    sendJson(r, status, {error: clean(message), request_id: r.variables.req_id});
}

function mediaType(value) {
    if (!value) {
        return '';
    }
    return value.split(';')[0].trim().toLowerCase();
}

// The Python service takes over a request the fast path does not convert itself.
function handOver(r) {
    r.internalRedirect('@python_service');
}

// ----- custom attributes ---------------------------------------------------------------------

function routing(r) {
    var route = {model: r.variables.tfs_default_model, version: null, method: 'predict'};
    var header = r.headersIn['X-Amzn-SageMaker-Custom-Attributes'];
    if (!header) {
        return route;
    }
    var pairs = header.split(',');
    for (var i = 0; i < pairs.length; i++) {
        var pair = pairs[i].trim();
        var eq = pair.indexOf('=');
        var key = (eq < 0 ? pair : pair.slice(0, eq)).trim();
        var value = eq < 0 ? '' : pair.slice(eq + 1).trim();
        if (key === 'tfs-model-name') {
            if (!NAME_RE.test(value)) {
                throw new HttpError(400, 'Invalid tfs-model-name in X-Amzn-SageMaker-Custom-Attributes: '
                    + quoted(value) + ' (expected letters, digits, ".", "_" or "-")');
            }
            route.model = value;
        } else if (key === 'tfs-model-version') {
            if (!VERSION_RE.test(value)) {
                throw new HttpError(400, 'Invalid tfs-model-version in X-Amzn-SageMaker-Custom-Attributes: '
                    + quoted(value) + ' (expected a non-negative integer)');
            }
            route.version = value;
        } else if (key === 'tfs-method') {
            if (!has(METHODS, value)) {
                throw new HttpError(400, 'Invalid tfs-method in X-Amzn-SageMaker-Custom-Attributes: '
                    + quoted(value) + ' (expected predict, classify or regress)');
            }
            route.method = value;
        }
    }
    return route;
}

function tfsPath(route) {
    var path = '/_tfs/v1/models/' + route.model;
    if (route.version !== null) {
        path += '/versions/' + route.version;
    }
    return path + ':' + route.method;
}

// ----- request bodies: a TF Serving request text, or null to hand the request over ----------

// JSON.parse (bare NaN/Infinity tokens taken as TF Serving does), or UNPARSED when the text
// is malformed or nested deeper than njs parses. No object per call: JSON Lines parse once per
// line.
var UNPARSED = Object.create(null);

function parseOr(text) {
    try {
        return JSON.parse(text);
    } catch (e) {
        if (text.indexOf('NaN') < 0 && text.indexOf('Infinity') < 0) {
            return UNPARSED;
        }
    }
    try {
        return JSON.parse(protectSpecialTokens(text));
    } catch (e) {
        return UNPARSED;
    }
}

function isTfsRequest(doc) {
    return doc !== null && typeof doc === 'object' && !Array.isArray(doc)
        && (has(doc, 'instances') || has(doc, 'inputs') || has(doc, 'examples'));
}

// A body that starts as a TF Serving request does is one (its first key is a top-level key):
// it passes through unparsed, so a large batch costs no parse here (the model server parses it).
var TFS_REQUEST_START = /^\s*\{\s*"(instances|inputs|examples)"\s*:/;

function jsonBody(text, key) {
    if (TFS_REQUEST_START.test(text.slice(0, 64))) {
        return text;
    }
    if (!text.trim().length) {
        throw new HttpError(400, 'Empty request body: expected JSON');
    }
    var value = parseOr(text);
    if (value === UNPARSED) {
        return null;
    }
    if (isTfsRequest(value)) {
        return text;  // passes through unchanged
    }
    // A list of lists is a list of instances; anything else is one instance.
    if (Array.isArray(value) && value.length && Array.isArray(value[0])) {
        return '{"' + key + '":' + text + '}';
    }
    return '{"' + key + '":[' + text + ']}';
}

function jsonLinesBody(text, key) {
    var lines = text.split('\n');
    var values = [];
    var first = null;
    for (var i = 0; i < lines.length; i++) {
        var line = lines[i].trim();
        if (!line.length) {
            continue;
        }
        var value = parseOr(line);
        if (value === UNPARSED) {
            return null;  // the Python service names the line that is wrong
        }
        if (first === null) {
            first = value;
        }
        values.push(line);
    }
    if (!values.length) {
        throw new HttpError(400, 'Empty request body: expected at least one JSON Lines record');
    }
    if (values.length === 1 && isTfsRequest(first)) {
        return values[0];  // one line holding a TF Serving request passes through
    }
    return '{"' + key + '":[' + values.join(',') + ']}';
}

// CSV whose every field is a JSON number: each row becomes a JSON array by text alone, and one
// JSON.parse checks them all (a row that is not exactly `width` numbers shows up there).
// Anything else (quotes, text, empty fields, NaN, ragged rows) is handed over.
function csvBody(text, key) {
    if (text.indexOf('"') >= 0) {
        return null;
    }
    var lines = text.split('\n');
    var rows = [];
    for (var i = 0; i < lines.length; i++) {
        var line = lines[i];
        // JSON.parse takes a trailing \r as whitespace; a line of only \r is an empty line
        if (line.length > 1 || line.length === 1 && line.charCodeAt(0) !== 13) {
            rows.push(line);
        }
    }
    if (!rows.length) {
        throw new HttpError(400, 'Empty request body: expected at least one CSV row');
    }
    var scalar = rows[0].indexOf(',') < 0;  // a one-column row is a scalar
    var items = scalar ? '[' + rows.join(',') + ']' : '[[' + rows.join('],[') + ']]';
    var values = parseOr(items);
    if (values === UNPARSED || values.length !== rows.length) {
        return null;
    }
    var width = scalar ? 1 : values[0].length;
    for (var r = 0; r < values.length; r++) {
        var row = values[r];
        if (scalar ? typeof row !== 'number' : row.length !== width || !allNumbers(row)) {
            return null;
        }
    }
    return '{"' + key + '":' + items + '}';
}

function requestBody(r, route, contentType) {
    var text = r.requestText || '';
    var key = METHODS[route.method];
    if (has(JSON_TYPES, contentType)) {
        return jsonBody(text, key);
    }
    if (has(JSONLINES_TYPES, contentType)) {
        if (!text.trim().length) {
            throw new HttpError(400, 'Empty request body: expected JSON Lines');
        }
        return jsonLinesBody(text, key);
    }
    return csvBody(text, key);
}

// ----- responses ------------------------------------------------------------------------------

// The response format Accept asks for: 'json', 'jsonlines' or 'csv'.
function responseFormat(r) {
    var header = r.headersIn.Accept;
    if (!header || !header.trim()) {
        return 'json';
    }
    var best = null;
    var bestQ = -1;
    var ranges = header.split(',');
    for (var i = 0; i < ranges.length; i++) {
        var parts = ranges[i].split(';');
        var type = parts[0].trim().toLowerCase();
        var q = 1;
        for (var j = 1; j < parts.length; j++) {
            var param = parts[j].trim();
            if (param.startsWith('q=')) {
                q = Number(param.slice(2));
            }
        }
        var format = null;
        if (type === 'application/json' || type === '*/*' || type === 'application/*') {
            format = 'json';
        } else if (has(JSONLINES_TYPES, type)) {
            format = 'jsonlines';
        } else if (has(CSV_TYPES, type) || type === 'text/*') {
            format = 'csv';
        }
        if (format !== null && q > 0 && q > bestQ) {
            best = format;
            bestQ = q;
        }
    }
    if (best === null) {
        throw new HttpError(406, 'Not Acceptable: ' + quoted(header)
            + ' (supported: application/json, application/jsonlines, text/csv)');
    }
    return best;
}

// Replace bare NaN/Infinity tokens (outside strings) by sentinel strings so JSON.parse takes
// them (a scan, so only texts that hold such tokens get here).
function protectSpecialTokens(text) {
    var out = [];
    var start = 0;
    var inString = false;
    for (var i = 0; i < text.length; i++) {
        var c = text.charCodeAt(i);
        if (inString) {
            if (c === 92) {  // backslash
                i++;
            } else if (c === 34) {  // quote
                inString = false;
            }
        } else if (c === 34) {
            inString = true;
        } else if (c === 78 && text.startsWith('NaN', i)) {
            out.push(text.slice(start, i), SENTINEL_JSON + 'NaN"');
            i += 2;
            start = i + 1;
        } else if (c === 73 && text.startsWith('Infinity', i)) {
            var neg = i > 0 && text.charCodeAt(i - 1) === 45;
            out.push(text.slice(start, neg ? i - 1 : i),
                SENTINEL_JSON + (neg ? '-' : '') + 'Infinity"');
            i += 7;
            start = i + 1;
        }
    }
    out.push(text.slice(start));
    return out.join('');
}

function parseAnswer(text) {
    try {
        return {doc: JSON.parse(text), special: false};
    } catch (e) {
        if (text.indexOf('NaN') < 0 && text.indexOf('Infinity') < 0) {
            throw e;
        }
        return {doc: JSON.parse(protectSpecialTokens(text)), special: true};
    }
}

// The answer's rows: predictions/results, or columnar outputs as {names, columns, count}.
function answerRows(doc) {
    if (has(doc, 'predictions')) {
        return {rows: doc.predictions};
    }
    if (has(doc, 'results')) {
        return {rows: doc.results};
    }
    var outputs = doc.outputs;
    if (outputs !== null && typeof outputs === 'object' && !Array.isArray(outputs)) {
        var names = Object.keys(outputs);
        var count = names.length && Array.isArray(outputs[names[0]]) ? outputs[names[0]].length : 0;
        return {names: names, columns: outputs, count: count};
    }
    return {rows: Array.isArray(outputs) ? outputs : [outputs]};
}

function allNumbers(list) {
    for (var i = 0; i < list.length; i++) {
        if (typeof list[i] !== 'number') {
            return false;
        }
    }
    return true;
}

// One value as JSON text; numbers and flat lists of numbers without JSON.stringify.
function jsonText(value) {
    if (typeof value === 'number') {
        return String(value);
    }
    if (Array.isArray(value) && allNumbers(value)) {
        return '[' + value.join(',') + ']';
    }
    return JSON.stringify(value);
}

function csvValue(value, out) {
    if (typeof value === 'number') {
        out.push(String(value));
    } else if (typeof value === 'string') {
        if (value.startsWith(SENTINEL)) {
            out.push(value.slice(SENTINEL.length));
        } else if (value.indexOf('"') >= 0 || value.indexOf(',') >= 0
            || value.indexOf('\n') >= 0 || value.indexOf('\r') >= 0) {
            out.push('"' + value.split('"').join('""') + '"');
        } else {
            out.push(value);
        }
    } else if (value !== null && typeof value === 'object') {
        out.push('"' + JSON.stringify(value).split('"').join('""') + '"');
    } else {
        out.push(String(value));
    }
}

// Every leaf of a row, in order ({"b64": ...} objects stay whole).
function flatten(value, out) {
    if (Array.isArray(value)) {
        if (allNumbers(value)) {
            out.push(value.join(','));
            return out;
        }
        for (var i = 0; i < value.length; i++) {
            flatten(value[i], out);
        }
    } else if (value !== null && typeof value === 'object' && !has(value, 'b64')) {
        var names = Object.keys(value);
        for (var k = 0; k < names.length; k++) {
            flatten(value[names[k]], out);
        }
    } else {
        csvValue(value, out);
    }
    return out;
}

function rowLine(row, format) {
    if (format !== 'csv') {
        return jsonText(row);
    }
    if (typeof row === 'number') {
        return String(row);
    }
    if (Array.isArray(row) && allNumbers(row)) {
        return row.join(',');
    }
    return flatten(row, []).join(',');
}

function columnLine(answer, index, format) {
    var parts = [];
    for (var k = 0; k < answer.names.length; k++) {
        var column = answer.columns[answer.names[k]];
        var value = Array.isArray(column) ? column[index] : undefined;
        if (format === 'csv') {
            flatten(value, parts);
        } else {
            parts.push(JSON.stringify(answer.names[k]) + ':' + jsonText(value));
        }
    }
    return format === 'csv' ? parts.join(',') : '{' + parts.join(',') + '}';
}

// TF Serving's answer on one line: a raw newline cannot occur inside a JSON string, so only
// the whitespace that follows each newline goes.
function oneLine(text) {
    if (text.indexOf('\n') < 0) {
        return text + '\n';
    }
    var lines = text.split('\n');
    for (var i = 1; i < lines.length; i++) {
        lines[i] = lines[i].trimStart();
    }
    return lines.join('') + '\n';
}

function convertResponse(text, format) {
    if (format === 'json') {
        return {type: 'application/json', body: oneLine(text)};
    }
    var parsedAnswer = parseAnswer(text);
    var answer = answerRows(parsedAnswer.doc);
    var lines = [];
    if (answer.names) {
        for (var c = 0; c < answer.count; c++) {
            lines.push(columnLine(answer, c, format));
        }
    } else {
        for (var i = 0; i < answer.rows.length; i++) {
            lines.push(rowLine(answer.rows[i], format));
        }
    }
    var body = lines.length ? lines.join('\n') + '\n' : '';
    if (parsedAnswer.special && format === 'jsonlines') {
        body = body.replace(SENTINEL_RE, '$1');
    }
    return {type: format === 'csv' ? 'text/csv' : 'application/jsonlines', body: body};
}

function upstreamFailure(r, reply) {
    // nginx's own error for the model server hop (refused, reset, timed out): JSON, not HTML.
    var contentType = reply.headersOut['Content-Type'] || '';
    if (reply.status < 500 || contentType.indexOf('json') >= 0) {
        return false;
    }
    if (reply.status === 504) {
        sendError(r, 504, 'The model server did not answer within the timeout');
    } else {
        sendError(r, 503, 'The model server is unavailable (HTTP ' + reply.status + ')');
    }
    return true;
}

// A model server error passes through with its status, on one line, as long as it is valid
// JSON in valid UTF-8 (it may echo a client's bytes); otherwise its text becomes our error.
function sendModelServerError(r, status, text) {
    var safe = clean(text);
    var doc = parseOr(safe);
    var valid = doc !== UNPARSED && doc !== null && typeof doc === 'object'
        && typeof doc.error === 'string';
    if (valid && safe === text) {
        r.headersOut['Content-Type'] = 'application/json';
        r.return(status, oneLine(text));
        return;
    }
    sendError(r, status, valid ? doc.error : safe);
}

async function invocations(r) {
    try {
        if (r.method !== 'POST') {
            r.headersOut.Allow = 'POST';
            throw new HttpError(405, 'Method Not Allowed: use POST /invocations');
        }
        var contentType = mediaType(r.headersIn['Content-Type']) || 'application/json';
        if (!has(JSON_TYPES, contentType) && !has(JSONLINES_TYPES, contentType)
            && !has(CSV_TYPES, contentType)) {
            // Binary formats (images, npy, tf.Example, TFRecord) are the Python service's.
            handOver(r);
            return;
        }
        var route = routing(r);
        r.variables.tfs_model = route.model;  // for /metrics (nginx.conf.template)
        var format = responseFormat(r);
        var body = requestBody(r, route, contentType);
        if (body === null) {
            handOver(r);
            return;
        }
        // a body passed through unchanged is not copied: the subrequest reads the client's
        var options = body === r.requestText ? {method: 'POST'} : {method: 'POST', body: body};
        var reply = await r.subrequest(tfsPath(route), options);
        if (upstreamFailure(r, reply)) {
            return;
        }
        var text = reply.responseText || '';
        if (reply.status !== 200) {
            sendModelServerError(r, reply.status, text);
            return;
        }
        var out;
        try {
            out = convertResponse(text, format);
        } catch (e) {
            sendError(r, 502, 'The model server answered with a body that is not JSON: ' + e.message);
            return;
        }
        r.headersOut['Content-Type'] = out.type;
        r.return(200, out.body);
    } catch (e) {
        if (e instanceof HttpError) {
            sendError(r, e.status, e.message);
        } else {
            r.error('invocations failed: ' + e.stack);
            sendError(r, 500, 'Internal error in the fast path: ' + e.message);
        }
    }
}

// ----- /ping ------------------------------------------------------------------------------------

function modelAvailable(reply) {
    if (reply.status !== 200) {
        return false;
    }
    var doc = JSON.parse(reply.responseText);
    var versions = doc.model_version_status || [];
    if (!versions.length) {
        return false;
    }
    for (var i = 0; i < versions.length; i++) {
        if (versions[i].state !== 'AVAILABLE') {
            return false;
        }
    }
    return true;
}

// 200 (empty body) only while every model is AVAILABLE on every model server instance and every
// extra check (e.g. the Python service) answers 200; serve sets $tfs_draining while stopping.
async function ping(r) {
    try {
        if (r.variables.tfs_draining === '1') {
            sendError(r, 503, 'Shutting down');
            return;
        }
        var targets = r.variables.tfs_ping_targets.split(' ').filter(function (t) {
            return t.length > 0;
        });
        var checks = targets.map(function (t) {
            return r.subrequest(t, {method: 'GET'});
        });
        var replies = await Promise.all(checks);
        for (var k = 0; k < replies.length; k++) {
            var isModel = targets[k].startsWith('/_instance/') && targets[k].indexOf('/v1/models/') > 0;
            if (isModel ? !modelAvailable(replies[k]) : replies[k].status !== 200) {
                sendError(r, 503, 'Not ready: ' + targets[k] + ' answered ' + replies[k].status);
                return;
            }
        }
        r.return(200, '');
    } catch (e) {
        r.error('ping failed: ' + e.message);
        sendError(r, 503, 'Not ready: ' + e.message);
    }
}

// ----- /execution-parameters ------------------------------------------------------------------

function executionParameters(r) {
    r.headersOut['Content-Type'] = 'application/json';
    r.return(200, r.variables.tfs_execution_parameters + '\n');
}

export default {invocations, ping, executionParameters};
