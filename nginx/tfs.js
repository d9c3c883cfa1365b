// The nginx fast path (njs 0.7.9): /ping and /invocations without user code.
//
// Requests are converted to TF Serving REST requests (JSON, JSON Lines, CSV of numbers in), sent
// to the model servers through the internal /_tfs/ location (upstream keep-alive), and converted
// back to what Accept asks for (JSON on one line, JSON Lines, CSV) by the answer's text, so
// numbers keep TF Serving's text. Every error is a JSON body. The Python service applies the
// same rules (sagemaker_serving/formats); test/support/format_cases.py holds the
// cases every path must answer alike.
//
// njs frees nothing before a request ends, so every step here allocates in proportion to the
// body, with a small constant: no string built a character at a time, no regular expression or
// JSON.stringify per value. What needs more than that (CSV with quotes, text or special
// numbers, JSON that does not parse) is handed to the Python service, which applies the same
// format rules.
//
// The contract's tables (routing rules, media types, Accept names, limits) are not written
// here: serve writes them from their Python homes into tfs_rules.js beside the rendered
// nginx.conf (sagemaker_serving/launcher/njs_tables.py), so the two paths cannot drift.

import RULES from 'tfs_rules.js';

var NAME_RE = new RegExp(RULES.modelNamePattern);
var VERSION_RE = new RegExp(RULES.modelVersionPattern);
var MAX_ECHO = RULES.maxEcho;  // characters of a client's header echoed in an error message
var ATTRIBUTES = RULES.attributesHeader;
var ATTRIBUTES_LOWER = ATTRIBUTES.toLowerCase();
var MODELS_PREFIX = '/models/';  // the multi-model API's per-model paths (multimodel/api.py)
var INVOKE_SUFFIX = '/invoke';

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

// A lookup table of the names in `list`.
function nameSet(list) {
    var t = Object.create(null);
    for (var i = 0; i < list.length; i++) {
        t[list[i]] = 1;
    }
    return t;
}

var METHODS = table(RULES.methods);  // method -> the request key of its records
var JSON_TYPES = nameSet(RULES.jsonTypes);
var JSONLINES_TYPES = nameSet(RULES.jsonLinesTypes);
var CSV_TYPES = nameSet([RULES.csv]);
var UTF8_CHARSETS = nameSet(RULES.utf8Charsets);
// A sentinel string that stands for a NaN/Infinity token of a request while JSON.parse sees it.
var SENTINEL_JSON = '"\\u0000tfs:';

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
    r.headersOut['Content-Type'] = RULES.json;
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

function invalidAttribute(key, value) {
    return new HttpError(400, 'Invalid ' + key + ' in ' + ATTRIBUTES + ': ' + quoted(value)
        + ' (expected ' + RULES.expected[key] + ')');
}

function routing(r) {
    var route = {model: r.variables.tfs_default_model, version: null, method: RULES.defaultMethod};
    var header = r.headersIn[ATTRIBUTES];
    if (!header) {
        return route;
    }
    var pairs = header.split(',');
    for (var i = 0; i < pairs.length; i++) {
        var pair = pairs[i].trim();
        var eq = pair.indexOf('=');
        var key = (eq < 0 ? pair : pair.slice(0, eq)).trim();
        var value = eq < 0 ? '' : pair.slice(eq + 1).trim();
        if (key === RULES.modelNameKey) {
            if (!NAME_RE.test(value)) {
                throw invalidAttribute(key, value);
            }
            route.model = value;
        } else if (key === RULES.modelVersionKey) {
            if (!VERSION_RE.test(value)) {
                throw invalidAttribute(key, value);
            }
            route.version = value;
        } else if (key === RULES.methodKey) {
            if (!has(METHODS, value)) {
                throw invalidAttribute(key, value);
            }
            route.method = value;
        }
    }
    return route;
}

// The model a request names, for the model label of /metrics (nginx.conf.template's request
// log, written when the answer is sent, whoever made it): a multi-model request's name from
// its URI, an invocation's routed model (its attributes, else the default model), percent-
// encoded (front_metrics.py decodes it); '' for any other request or a bad routing header.
function requestModel(r) {
    var uri = r.variables.request_uri.split('?')[0];
    var name;
    if (uri.slice(0, MODELS_PREFIX.length) === MODELS_PREFIX) {
        name = uri.slice(MODELS_PREFIX.length);
        name = name.slice(-INVOKE_SUFFIX.length) === INVOKE_SUFFIX
            ? name.slice(0, -INVOKE_SUFFIX.length) : name;
        try {
            name = decodeURIComponent(name);
        } catch (e) {
            // not valid percent-encoding: counted under the name as sent
        }
    } else if (uri === '/invocations') {
        try {
            name = routing(r).model;
        } catch (e) {
            return '';  // a 400 for its attributes
        }
    }
    return name ? encodeURIComponent(name) : '';
}

// '1' when X-Amzn-SageMaker-Custom-Attributes came more than once: nginx.conf refuses such a
// request on every path (njs would join the headers, the Python service read the first).
function repeatedAttributes(r) {
    var raw = r.rawHeadersIn;
    var seen = 0;
    for (var i = 0; i < raw.length; i++) {
        if (raw[i][0].toLowerCase() === ATTRIBUTES_LOWER && ++seen > 1) {
            return '1';
        }
    }
    return '';
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

// true when every item of `list` is of `type` ('number', 'string', ...)
function allOfType(list, type) {
    for (var i = 0; i < list.length; i++) {
        if (typeof list[i] !== type) {
            return false;
        }
    }
    return true;
}

function isTfsRequest(doc) {
    return doc !== null && typeof doc === 'object' && !Array.isArray(doc)
        && RULES.requestKeys.some(function (key) {
            return has(doc, key);
        });
}

// A body that starts as a TF Serving request does is one (its first key is a top-level key):
// it passes through unparsed, so a large batch costs no parse here (the model server parses it).
var TFS_REQUEST_START = new RegExp('^\\s*\\{\\s*"(' + RULES.requestKeys.join('|') + ')"\\s*:');

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
    if (Array.isArray(value) && value.length && value.every(Array.isArray)) {
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
        throw new HttpError(400, 'Empty request body: expected JSON Lines');
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
        throw new HttpError(400, 'Empty request body: expected CSV rows');
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
        if (scalar ? typeof row !== 'number' : row.length !== width || !allOfType(row, 'number')) {
            return null;
        }
    }
    return '{"' + key + '":' + items + '}';
}

// CSV parameters other than charset=utf-8 (header=present, another charset) are the Python
// service's.
function plainCsv(header) {
    var params = header.split(';');
    for (var i = 1; i < params.length; i++) {
        var eq = params[i].indexOf('=');
        var name = params[i].slice(0, eq < 0 ? params[i].length : eq).trim().toLowerCase();
        var value = eq < 0 ? '' : params[i].slice(eq + 1).trim().replace(/^"+|"+$/g, '');
        if (name !== 'charset' || !has(UTF8_CHARSETS, value.toLowerCase())) {
            return false;
        }
    }
    return true;
}

function requestBody(r, route, contentType) {
    if (r.variables.request_body_file) {
        // a chunked body's framing can push one under the limit out of the memory buffer into
        // a temporary file, which njs cannot read: the Python service reads it from there
        return null;
    }
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
    return plainCsv(r.headersIn['Content-Type']) ? csvBody(text, key) : null;
}

// ----- Accept ---------------------------------------------------------------------------------

// Supported answer types in tie-break order (a wildcard prefers the earliest).
var ACCEPT_TYPES = RULES.acceptTypes;
var SUPPORTED = RULES.supported;
var QVALUE_RE = new RegExp(RULES.qvaluePattern);

// An Accept range's q (1 without one; 0, never chosen, when it is not a number in [0, 1]).
function qValue(entry) {
    var q = 1;
    var params = entry.split(';');
    for (var i = 1; i < params.length; i++) {
        var eq = params[i].indexOf('=');
        if (eq >= 0 && params[i].slice(0, eq).trim().toLowerCase() === 'q') {
            var text = params[i].slice(eq + 1).trim().replace(/^"+|"+$/g, '');
            q = QVALUE_RE.test(text) ? Number(text) : 0;
        }
    }
    return q <= 1 ? q : 0;
}

// How closely a media range matches a supported type: 2 exactly, 1 main/*, 0 */*, -1 not.
function specificity(range, supported) {
    if (range === supported) {
        return 2;
    }
    if (range === supported.slice(0, supported.indexOf('/')) + '/*') {
        return 1;
    }
    return range === '*/*' || range === '*' ? 0 : -1;
}

// The answer's Content-Type for Accept: each supported type takes the q of its most specific
// range (q=0: not acceptable); the highest q wins, then the earliest range, then ACCEPT_TYPES.
function negotiate(header) {
    if (!header || !header.trim().length) {
        return RULES.defaultType;
    }
    var ranked = Object.create(null);  // type -> [specificity, q, range index]
    var entries = header.split(',');
    for (var i = 0; i < entries.length; i++) {
        var range = entries[i].split(';')[0].trim().toLowerCase();
        if (!range.length) {
            continue;
        }
        var q = qValue(entries[i]);
        for (var k = 0; k < ACCEPT_TYPES.length; k++) {
            var s = specificity(range, ACCEPT_TYPES[k]);
            var seen = ranked[ACCEPT_TYPES[k]];
            if (s > (seen ? seen[0] : -1)) {
                ranked[ACCEPT_TYPES[k]] = [s, q, i];
            }
        }
    }
    var best = null;
    for (var t = 0; t < ACCEPT_TYPES.length; t++) {
        var r = ranked[ACCEPT_TYPES[t]];
        if (r && r[1] > 0 && (best === null || r[1] > best[1] || r[1] === best[1] && r[2] < best[2])) {
            best = [ACCEPT_TYPES[t], r[1], r[2]];
        }
    }
    if (best === null) {
        throw new HttpError(406, 'Not Acceptable: ' + quoted(header) + ' (supported: ' + SUPPORTED + ')');
    }
    return best[0];
}

// ----- answers, by their text (as sagemaker_serving/formats/answers.py) ---------------------
//
// JSON: TF Serving's answer on one line. JSON Lines: one line per prediction, its text in that
// line. CSV: one row per prediction, its leaves: numbers and true/false as written, strings
// unescaped (quoted when they hold '"', ',', CR or LF), {"b64": s} as s, null empty; a row
// with no text is "". Predictions: the items of predictions/results; columnar outputs give one
// per index when every output is a list of one length, else the whole value.

var ANSWER_START = new RegExp('^\\{\\s*"(' + RULES.answerKeys.join('|') + ')"\\s*:\\s*');
var CSV_DROP = /[\[\] \t\r\n]/g;  // a value's brackets and whitespace
var CSV_DROP_KEEP_LF = /[\[\] \t\r]/g;

// TF Serving's answer on one line: a raw newline cannot occur inside a JSON string, so only
// each newline and the whitespace after it go.
function oneLine(text) {
    text = text.trim();
    if (text.indexOf('\n') < 0) {
        return text;
    }
    var lines = text.split('\n');
    for (var i = 1; i < lines.length; i++) {
        lines[i] = lines[i].trimStart();
    }
    return lines.join('');
}

function skipSpace(s, i) {
    for (;;) {
        var c = s.charCodeAt(i);
        if (c !== 32 && c !== 9 && c !== 10 && c !== 13) {
            return i;
        }
        i++;
    }
}

function stringEnd(s, i) {
    for (var j = i + 1; ;) {
        var k = s.indexOf('"', j);
        if (k < 0) {
            throw new Error('unterminated string at ' + i);
        }
        var b = k - 1;
        while (s.charCodeAt(b) === 92) {  // backslash
            b--;
        }
        if ((k - 1 - b) % 2 === 0) {
            return k + 1;
        }
        j = k + 1;
    }
}

// The end of the JSON value that starts at i (strings are skipped by indexOf).
function valueEnd(s, i) {
    var c = s.charCodeAt(i);
    var start = i;
    if (c === 34) {
        return stringEnd(s, i);
    }
    if (c !== 91 && c !== 123) {
        while (i < s.length && (c = s.charCodeAt(i)) !== 44 && c !== 93 && c !== 125
            && c !== 32 && c !== 9 && c !== 10 && c !== 13) {
            i++;
        }
        if (i === start) {
            throw new Error('no JSON value at ' + start);
        }
        return i;
    }
    for (var depth = 0; i < s.length; i++) {
        c = s.charCodeAt(i);
        if (c === 34) {
            i = stringEnd(s, i) - 1;
        } else if (c === 91 || c === 123) {
            depth++;
        } else if ((c === 93 || c === 125) && --depth === 0) {
            return i + 1;
        }
    }
    throw new Error('unterminated value at ' + start);
}

// The items of an array of numbers or of equally nested arrays of them (a tensor), by
// splitting where the items' closing brackets meet a comma.
function numericItems(array) {
    var inner = array.slice(1, -1).trim();
    if (!inner.length) {
        return [];
    }
    var depth = 0;
    while (inner.charCodeAt(depth) === 91) {
        depth++;
    }
    var close = depth ? ']'.repeat(depth) : '';
    var pieces = inner.split(close + ',');
    for (var i = 0; i < pieces.length; i++) {
        pieces[i] = pieces[i].trim() + (i < pieces.length - 1 ? close : '');
    }
    return pieces;
}

// The texts of a JSON array's items.
function items(array) {
    if (array.indexOf('"') < 0 && array.indexOf('{') < 0) {
        return numericItems(array);
    }
    var out = [];
    var i = skipSpace(array, 1);
    while (i < array.length && array.charCodeAt(i) !== 93) {
        var end = valueEnd(array, i);
        out.push(array.slice(i, end));
        i = skipSpace(array, end);
        if (array.charCodeAt(i) === 44) {
            i = skipSpace(array, i + 1);
        }
    }
    return out;
}

// [key text, value text] of a JSON object's members.
function members(obj) {
    var out = [];
    var i = skipSpace(obj, 1);
    while (i < obj.length && obj.charCodeAt(i) !== 125) {
        var keyEnd = valueEnd(obj, i);
        var start = skipSpace(obj, skipSpace(obj, keyEnd) + 1);  // past the colon
        var end = valueEnd(obj, start);
        out.push([obj.slice(i, keyEnd), obj.slice(start, end)]);
        i = skipSpace(obj, end);
        if (obj.charCodeAt(i) === 44) {
            i = skipSpace(obj, i + 1);
        }
    }
    return out;
}

// The predictions of a one-line answer: each the text of a value, or (columnar outputs) an
// array of [key text, item text].
function answerRows(text) {
    var start = ANSWER_START.exec(text);
    if (start === null || text.charCodeAt(text.length - 1) !== 125) {
        throw new Error('not a TF Serving answer: no ' + RULES.answerKeys.join(' or ') + ' key');
    }
    var value = text.slice(start[0].length, -1).trim();
    if (value.charCodeAt(0) === 91) {
        return items(value);
    }
    if (start[1] === RULES.columnarAnswerKey && value.charCodeAt(0) === 123) {
        var rows = columnRows(members(value));
        if (rows !== null) {
            return rows;
        }
    }
    return [value];
}

function columnRows(columns) {
    if (columns.length < 2) {
        return null;
    }
    var lists = [];
    for (var k = 0; k < columns.length; k++) {
        if (columns[k][1].charCodeAt(0) !== 91) {
            return null;
        }
        lists.push(items(columns[k][1]));
        if (lists[k].length !== lists[0].length) {
            return null;
        }
    }
    var rows = [];
    for (var i = 0; i < lists[0].length; i++) {
        var row = [];
        for (var c = 0; c < columns.length; c++) {
            row.push([columns[c][0], lists[c][i]]);
        }
        rows.push(row);
    }
    return rows;
}

function jsonLine(row) {
    if (typeof row === 'string') {
        return row;
    }
    var parts = [];
    for (var i = 0; i < row.length; i++) {
        parts.push(row[i][0] + ': ' + row[i][1]);
    }
    return '{' + parts.join(',') + '}';
}

function csvQuoted(text) {
    if (text.indexOf('"') >= 0 || text.indexOf(',') >= 0 || text.indexOf('\n') >= 0
        || text.indexOf('\r') >= 0) {
        return '"' + text.split('"').join('""') + '"';
    }
    return text;
}

// The leaves of the value at s[i] as CSV fields, onto `out`; returns the value's end.
function leaves(s, i, out) {
    var c = s.charCodeAt(i);
    var end = valueEnd(s, i);
    if (c === 34) {
        out.push(csvQuoted(JSON.parse(s.slice(i, end))));
    } else if (c === 91) {
        for (var j = skipSpace(s, i + 1); j < end - 1;) {
            j = skipSpace(s, leaves(s, j, out));
            if (s.charCodeAt(j) === 44) {
                j = skipSpace(s, j + 1);
            }
        }
    } else if (c === 123) {
        var parts = members(s.slice(i, end));
        if (parts.length === 1 && JSON.parse(parts[0][0]) === 'b64'
            && parts[0][1].charCodeAt(0) === 34) {
            out.push(csvQuoted(JSON.parse(parts[0][1])));
        } else {
            for (var k = 0; k < parts.length; k++) {
                leaves(parts[k][1], 0, out);
            }
        }
    } else {
        var token = s.slice(i, end);
        out.push(token === 'null' ? '' : token);
    }
    return end;
}

function csvFields(text, out) {
    if (text.indexOf('"') < 0 && text.indexOf('null') < 0) {  // numbers, true/false
        var joined = text.replace(CSV_DROP, '');
        if (joined.length) {
            out.push(joined);
        }
    } else {
        leaves(text, 0, out);
    }
}

function csvLine(row) {
    var fields = [];
    if (typeof row === 'string') {
        csvFields(row, fields);
    } else {
        for (var i = 0; i < row.length; i++) {
            csvFields(row[i][1], fields);
        }
    }
    var line = fields.join(',');
    return line.length ? line : '""';  // a blank line would be no row at all
}

// CSV rows of numbers (and true/false) at once: their brackets and spaces go in one pass
// (null when some row is not such, or would be empty).
function numericCsv(rows) {
    var joined = rows.join('\n');
    if (joined.indexOf('"') >= 0 || joined.indexOf('null') >= 0) {
        return null;
    }
    var body = joined.replace(CSV_DROP_KEEP_LF, '');
    if (!body.length || body.charCodeAt(0) === 10 || body.charCodeAt(body.length - 1) === 10
        || body.indexOf('\n\n') >= 0) {
        return null;
    }
    return body + '\n';
}

// A successful answer as `type` (from negotiate) asks.
function convertResponse(text, type) {
    var line = oneLine(text);
    if (type === RULES.json) {
        return line + '\n';
    }
    var rows = answerRows(line);
    if (!rows.length) {
        return '';
    }
    var plain = allOfType(rows, 'string');
    if (plain && type !== RULES.csv) {
        return rows.join('\n') + '\n';
    }
    var body = plain ? numericCsv(rows) : null;
    if (body !== null) {
        return body;
    }
    var lines = [];
    for (var i = 0; i < rows.length; i++) {
        lines.push(type === RULES.csv ? csvLine(rows[i]) : jsonLine(rows[i]));
    }
    return lines.join('\n') + '\n';
}

function upstreamFailure(r, reply) {
    // nginx's own error for the model server hop (refused, reset, timed out, or an HTML page
    // about our own request): JSON, not HTML. The model servers answer errors in JSON.
    var contentType = reply.headersOut['Content-Type'] || '';
    var nginxPage = contentType.indexOf('text/html') >= 0;
    if (reply.status < 500 && !nginxPage || contentType.indexOf('json') >= 0) {
        return false;
    }
    if (reply.status < 500) {
        r.error('the fast path\'s request to the model server got nginx\'s ' + reply.status);
        sendError(r, 502, 'The request to the model server failed (HTTP ' + reply.status + ')');
    } else if (reply.status === 504) {
        sendError(r, 504, 'The model server did not answer within the timeout');
    } else {
        sendError(r, 503, 'The model server is unavailable (HTTP ' + reply.status + ')');
    }
    return true;
}

// A model server error keeps its status and message, in our error body (with the request
// id), as the Python service answers it; its text becomes the message when it is not JSON.
function sendModelServerError(r, status, text) {
    var safe = clean(text);
    var doc = parseOr(safe);
    var valid = doc !== UNPARSED && doc !== null && typeof doc === 'object'
        && typeof doc.error === 'string';
    sendError(r, status, valid ? doc.error : safe);
}

async function invocations(r) {
    try {
        if (r.method !== 'POST') {
            r.headersOut.Allow = 'POST';
            throw new HttpError(405, 'Method Not Allowed: use POST /invocations');
        }
        var contentType = mediaType(r.headersIn['Content-Type']) || RULES.defaultType;
        if (!has(JSON_TYPES, contentType) && !has(JSONLINES_TYPES, contentType)
            && !has(CSV_TYPES, contentType)) {
            // Binary formats (images, npy, tf.Example, TFRecord) are the Python service's.
            handOver(r);
            return;
        }
        var route = routing(r);
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
        // Accept is decided on the model's answer, as on every path (errors are always JSON)
        var type = negotiate(r.headersIn.Accept);
        var out;
        try {
            out = convertResponse(text, type);
        } catch (e) {
            r.warn('not a TF Serving answer: ' + e.message);
            sendError(r, 502, 'The model server answered with a body that is not a TF Serving answer');
            return;
        }
        r.headersOut['Content-Type'] = type;
        r.return(200, out);
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

var INSTANCE_MODEL = /^\/_instance\/[0-9]+\/v1\/models\/(.*)$/;

// Why a check failed, in words without internal addresses: the model's name, or what the
// Python service said (its JSON error), else its status.
function notReady(uri, reply) {
    var model = INSTANCE_MODEL.exec(uri);
    if (model !== null) {
        return 'Not ready: model ' + model[1] + ' is not available (' + reply.status + ')';
    }
    var doc = parseOr(reply.responseText || '');
    if (doc !== UNPARSED && doc !== null && typeof doc === 'object'
        && typeof doc.error === 'string') {
        return doc.error;
    }
    return 'Not ready: the Python service answered ' + reply.status;
}

var PING_CHECKS = table({model: modelAvailable, ok: function (reply) {
    return reply.status === 200;
}});

// 200 (empty body) only while every check of $tfs_ping_targets (`kind=internal URI`, written by
// nginx_config.ping_targets) passes: `model=` a model AVAILABLE on an instance, `ok=` a 200 (the
// Python service, which on a multi-model endpoint also tells whether every instance is up);
// serve sets $tfs_draining while stopping.
async function ping(r) {
    try {
        if (r.variables.tfs_draining === '1') {
            sendError(r, 503, 'Shutting down');
            return;
        }
        var targets = r.variables.tfs_ping_targets.split(' ').filter(function (t) {
            return t.length > 0;
        }).map(function (t) {
            var eq = t.indexOf('=');
            return {check: PING_CHECKS[t.slice(0, eq)], uri: t.slice(eq + 1)};
        });
        var checks = targets.map(function (t) {
            return r.subrequest(t.uri, {method: 'GET'});
        });
        var replies = await Promise.all(checks);
        for (var k = 0; k < replies.length; k++) {
            if (!targets[k].check(replies[k])) {
                sendError(r, 503, notReady(targets[k].uri, replies[k]));
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
    r.headersOut['Content-Type'] = RULES.json;
    r.return(200, r.variables.tfs_execution_parameters + '\n');
}

export default {invocations, ping, executionParameters, repeatedAttributes, requestModel};
