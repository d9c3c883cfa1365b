// The nginx fast path (njs 0.7.9): /ping and /invocations without user code.
//
// Requests are converted to TF Serving REST requests (JSON, JSON Lines, CSV in), sent to the
// model servers through the internal /_tfs/ location (upstream keep-alive), and converted back
// to what Accept asks for (JSON on one line, JSON Lines, CSV). Every error is a JSON body.

var NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/;
var VERSION_RE = /^[0-9]{1,19}$/;
var METHODS = {predict: 'instances', classify: 'examples', regress: 'examples'};
// curl -d sends application/x-www-form-urlencoded: such bodies are read as JSON.
var JSON_TYPES = {'application/json': 1, 'application/x-www-form-urlencoded': 1};
var JSONLINES_TYPES = {
    'application/jsonlines': 1, 'application/jsons': 1, 'application/x-jsonlines': 1,
    'application/json-lines': 1, 'application/x-ndjson': 1, 'application/ndjson': 1
};
var CSV_TYPES = {'text/csv': 1};
var JSON_NUMBER_RE = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;
var LOOSE_NUMBER_RE = /^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$/;
var SPECIAL_NUMBERS = {
    'NaN': 'NaN', 'nan': 'NaN', 'inf': 'Infinity', '+inf': 'Infinity', 'Infinity': 'Infinity',
    '+Infinity': 'Infinity', '-inf': '-Infinity', '-Infinity': '-Infinity'
};
// Sentinel strings that stand for NaN/Infinity tokens while JSON.parse/stringify see them.
var SENTINEL = '\u0000tfs:';
var SENTINEL_JSON = '"\\u0000tfs:';  // the same, as JSON source text
var SENTINEL_RE = /"\\u0000tfs:(NaN|-?Infinity)"/g;

function HttpError(status, message) {
    this.status = status;
    this.message = message;
}

function sendJson(r, status, obj) {
    r.headersOut['Content-Type'] = 'application/json';
    r.return(status, JSON.stringify(obj) + '\n');
}

function sendError(r, status, message) {
    sendJson(r, status, {error: message, request_id: r.variables.req_id});
}

function mediaType(value) {
    if (!value) {
        return '';
    }
    return value.split(';')[0].trim().toLowerCase();
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
                    + JSON.stringify(value) + ' (expected letters, digits, ".", "_" or "-")');
            }
            route.model = value;
        } else if (key === 'tfs-model-version') {
            if (!VERSION_RE.test(value)) {
                throw new HttpError(400, 'Invalid tfs-model-version in X-Amzn-SageMaker-Custom-Attributes: '
                    + JSON.stringify(value) + ' (expected a non-negative integer)');
            }
            route.version = value;
        } else if (key === 'tfs-method') {
            if (!METHODS.hasOwnProperty(value)) {
                throw new HttpError(400, 'Invalid tfs-method in X-Amzn-SageMaker-Custom-Attributes: '
                    + JSON.stringify(value) + ' (expected predict, classify or regress)');
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

// ----- JSON with NaN / Infinity tokens -------------------------------------------------------

// Replace bare NaN/Infinity tokens (outside strings) by sentinel strings so JSON.parse accepts them.
function protectSpecialTokens(text) {
    var out = [];
    var start = 0;
    var inString = false;
    for (var i = 0; i < text.length; i++) {
        var c = text[i];
        if (inString) {
            if (c === '\\') {
                i++;
            } else if (c === '"') {
                inString = false;
            }
        } else if (c === '"') {
            inString = true;
        } else if (c === 'N' && text.startsWith('NaN', i)) {
            out.push(text.slice(start, i), SENTINEL_JSON + 'NaN"');
            i += 2;
            start = i + 1;
        } else if (c === 'I' && text.startsWith('Infinity', i)) {
            var neg = i > 0 && text[i - 1] === '-';
            out.push(text.slice(start, neg ? i - 1 : i),
                SENTINEL_JSON + (neg ? '-' : '') + 'Infinity"');
            i += 7;
            start = i + 1;
        }
    }
    out.push(text.slice(start));
    return out.join('');
}

function parseJson(text) {
    try {
        return JSON.parse(text);
    } catch (e) {
        if (text.indexOf('NaN') < 0 && text.indexOf('Infinity') < 0) {
            throw e;
        }
        return JSON.parse(protectSpecialTokens(text));
    }
}

function stringifyJson(value) {
    return JSON.stringify(value).replace(SENTINEL_RE, '$1');
}

// ----- request bodies -------------------------------------------------------------------------

function isTfsRequest(text) {
    // A JSON object with a top-level instances/inputs/examples key is passed through unchanged.
    var doc;
    try {
        doc = parseJson(text);
    } catch (e) {
        // Malformed, but shaped like a TF Serving request: let TF Serving say what is wrong.
        return /^\s*\{/.test(text) && /"(instances|inputs|examples)"\s*:/.test(text);
    }
    return doc !== null && typeof doc === 'object' && !Array.isArray(doc)
        && (doc.hasOwnProperty('instances') || doc.hasOwnProperty('inputs')
            || doc.hasOwnProperty('examples'));
}

function splitLines(text) {
    var raw = text.split('\n');
    var lines = [];
    for (var i = 0; i < raw.length; i++) {
        var line = raw[i].trim();
        if (line.length) {
            lines.push({text: line, number: i + 1});
        }
    }
    return lines;
}

function jsonLinesInstances(text) {
    var lines = splitLines(text);
    var values = [];
    for (var i = 0; i < lines.length; i++) {
        try {
            parseJson(lines[i].text);
        } catch (e) {
            throw new HttpError(400, 'Malformed JSON Lines: line ' + lines[i].number
                + ' is not valid JSON: ' + e.message);
        }
        values.push(lines[i].text);
    }
    if (!values.length) {
        throw new HttpError(400, 'Empty request body: expected at least one JSON Lines record');
    }
    return '[' + values.join(',') + ']';
}

function jsonBody(text, key) {
    if (!text.trim().length) {
        throw new HttpError(400, 'Empty request body: expected JSON');
    }
    if (isTfsRequest(text)) {
        return text;
    }
    var doc;
    try {
        doc = parseJson(text);
    } catch (e) {
        // Several JSON values, one per line, are JSON Lines (reference behaviour).
        if (splitLines(text).length > 1) {
            try {
                return '{"' + key + '":' + jsonLinesInstances(text) + '}';
            } catch (ignored) {
                // fall through to the JSON error
            }
        }
        throw new HttpError(400, 'Malformed JSON request body: ' + e.message);
    }
    // A list of lists is a list of instances; anything else is one instance.
    if (Array.isArray(doc) && doc.length && Array.isArray(doc[0])) {
        return '{"' + key + '":' + text + '}';
    }
    return '{"' + key + '":[' + text + ']}';
}

// RFC 4180 CSV -> rows of typed JSON tokens.
function csvField(token, quoted) {
    if (quoted) {
        return JSON.stringify(token);
    }
    var t = token.trim();
    if (JSON_NUMBER_RE.test(t)) {
        return t;
    }
    if (LOOSE_NUMBER_RE.test(t)) {
        return String(Number(t));
    }
    if (SPECIAL_NUMBERS.hasOwnProperty(t)) {
        return SPECIAL_NUMBERS[t];
    }
    return JSON.stringify(token);
}

function csvRows(text) {
    var rows = [];
    var row = [];
    var field = '';
    var quoted = false;
    var i = 0;
    var n = text.length;
    var line = 1;
    var fieldStart = true;
    var inQuotes = false;
    while (i < n) {
        var c = text[i];
        if (inQuotes) {
            if (c === '"') {
                if (text[i + 1] === '"') {
                    field += '"';
                    i += 2;
                    continue;
                }
                inQuotes = false;
                i++;
                continue;
            }
            if (c === '\n') {
                line++;
            }
            field += c;
            i++;
            continue;
        }
        if (c === '"' && fieldStart) {
            inQuotes = true;
            quoted = true;
            fieldStart = false;
            i++;
            continue;
        }
        if (c === ',') {
            row.push(csvField(field, quoted));
            field = '';
            quoted = false;
            fieldStart = true;
            i++;
            continue;
        }
        if (c === '\r' || c === '\n') {
            if (c === '\r' && text[i + 1] === '\n') {
                i++;
            }
            if (row.length || field.length || quoted) {
                row.push(csvField(field, quoted));
                rows.push({fields: row, line: line});
            }
            row = [];
            field = '';
            quoted = false;
            fieldStart = true;
            line++;
            i++;
            continue;
        }
        if (quoted) {
            throw new HttpError(400, 'Malformed CSV: unexpected character after a closing quote on line '
                + line);
        }
        field += c;
        fieldStart = false;
        i++;
    }
    if (inQuotes) {
        throw new HttpError(400, 'Malformed CSV: unterminated quoted field starting before line ' + line);
    }
    if (row.length || field.length || quoted) {
        row.push(csvField(field, quoted));
        rows.push({fields: row, line: line});
    }
    return rows;
}

function csvBody(text, key) {
    var rows = csvRows(text);
    if (!rows.length) {
        throw new HttpError(400, 'Empty request body: expected at least one CSV row');
    }
    var width = rows[0].fields.length;
    var items = [];
    for (var i = 0; i < rows.length; i++) {
        var fields = rows[i].fields;
        if (fields.length !== width) {
            throw new HttpError(400, 'Malformed CSV: line ' + rows[i].line + ' has ' + fields.length
                + ' fields but line ' + rows[0].line + ' has ' + width);
        }
        items.push(width === 1 ? fields[0] : '[' + fields.join(',') + ']');
    }
    return '{"' + key + '":[' + items.join(',') + ']}';
}

function requestBody(r, route) {
    var contentType = mediaType(r.headersIn['Content-Type']) || 'application/json';
    var text = r.requestText || '';
    var key = METHODS[route.method];
    if (JSON_TYPES[contentType]) {
        return jsonBody(text, key);
    }
    if (JSONLINES_TYPES[contentType]) {
        if (!text.trim().length) {
            throw new HttpError(400, 'Empty request body: expected JSON Lines');
        }
        var lines = splitLines(text);
        if (lines.length === 1 && isTfsRequest(lines[0].text)) {
            return lines[0].text;
        }
        return '{"' + key + '":' + jsonLinesInstances(text) + '}';
    }
    if (CSV_TYPES[contentType]) {
        return csvBody(text, key);
    }
    throw new HttpError(415, 'Unsupported Media Type: ' + (r.headersIn['Content-Type'] || 'none')
        + ' (supported: application/json, application/jsonlines, text/csv)');
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
        } else if (JSONLINES_TYPES[type]) {
            format = 'jsonlines';
        } else if (CSV_TYPES[type] || type === 'text/*') {
            format = 'csv';
        }
        if (format !== null && q > 0 && q > bestQ) {
            best = format;
            bestQ = q;
        }
    }
    if (best === null) {
        throw new HttpError(406, 'Not Acceptable: ' + header
            + ' (supported: application/json, application/jsonlines, text/csv)');
    }
    return best;
}

function resultRows(doc) {
    if (doc.hasOwnProperty('predictions')) {
        return doc.predictions;
    }
    if (doc.hasOwnProperty('results')) {
        return doc.results;
    }
    var outputs = doc.outputs;
    if (outputs !== null && typeof outputs === 'object' && !Array.isArray(outputs)) {
        // Columnar with several outputs: one row per index, as an object of outputs.
        var names = Object.keys(outputs);
        var count = names.length ? outputs[names[0]].length : 0;
        var rows = [];
        for (var i = 0; i < count; i++) {
            var row = {};
            for (var k = 0; k < names.length; k++) {
                row[names[k]] = outputs[names[k]][i];
            }
            rows.push(row);
        }
        return rows;
    }
    return Array.isArray(outputs) ? outputs : [outputs];
}

function csvValue(value) {
    if (typeof value === 'string') {
        if (value.startsWith(SENTINEL)) {
            return value.slice(SENTINEL.length);
        }
        return /[",\r\n]/.test(value) ? '"' + value.replace(/"/g, '""') + '"' : value;
    }
    if (value !== null && typeof value === 'object') {
        var s = stringifyJson(value);
        return '"' + s.replace(/"/g, '""') + '"';
    }
    return String(value);
}

function flatten(value, out) {
    if (Array.isArray(value)) {
        for (var i = 0; i < value.length; i++) {
            flatten(value[i], out);
        }
    } else if (value !== null && typeof value === 'object' && !value.hasOwnProperty('b64')) {
        var names = Object.keys(value);
        for (var k = 0; k < names.length; k++) {
            flatten(value[names[k]], out);
        }
    } else {
        out.push(csvValue(value));
    }
    return out;
}

function convertResponse(text, format) {
    if (format === 'json') {
        // Raw newlines cannot occur inside JSON strings, so this keeps every value intact.
        return {type: 'application/json', body: text.replace(/\n\s*/g, '') + '\n'};
    }
    var rows = resultRows(parseJson(text));
    var lines = [];
    for (var i = 0; i < rows.length; i++) {
        lines.push(format === 'csv' ? flatten(rows[i], []).join(',') : stringifyJson(rows[i]));
    }
    var body = lines.length ? lines.join('\n') + '\n' : '';
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

async function invocations(r) {
    try {
        if (r.method !== 'POST') {
            r.headersOut.Allow = 'POST';
            throw new HttpError(405, 'Method Not Allowed: use POST /invocations');
        }
        var contentType = mediaType(r.headersIn['Content-Type']) || 'application/json';
        if (!JSON_TYPES[contentType] && !JSONLINES_TYPES[contentType] && !CSV_TYPES[contentType]
            && r.variables.tfs_python_service === '1') {
            // Binary formats (images, npy, tf.Example, TFRecord) are the Python service's.
            r.internalRedirect('@python_service');
            return;
        }
        var route = routing(r);
        r.variables.tfs_model = route.model;  // for /metrics (nginx.conf.template)
        var format = responseFormat(r);
        var body = requestBody(r, route);
        var reply = await r.subrequest(tfsPath(route), {method: 'POST', body: body});
        if (upstreamFailure(r, reply)) {
            return;
        }
        var text = reply.responseText || '';
        if (reply.status !== 200) {
            // TF Serving's own {"error": ...} passes through with its status, on one line.
            r.headersOut['Content-Type'] = 'application/json';
            r.return(reply.status, text.replace(/\n\s*/g, '') + '\n');
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

export default {invocations, ping};
