-- SPDX-License-Identifier: MIT
-- hostile.sql - applied after fixture.sql by the escaping tests: SQL text,
-- fingerprints, function and file names, an error message and an
-- executable name that try to break out of SVG, HTML, JSON and CSV. Each
-- payload that would run marks the document with data-pwned="1" (the
-- browser test looks for it).
UPDATE queries SET
  fingerprint = '<script>document.documentElement.setAttribute("data-pwned","1")</script> ]]> '' " ;x' || char(10) || 'y',
  sql = '</script><script>document.documentElement.setAttribute("data-pwned","1")</script>'
  WHERE fp_id = 1002;
UPDATE queries SET fingerprint = '=cmd|'' /C calc''!A0' WHERE fp_id = 1001;
UPDATE statements SET sql = '<img src=x onerror=''document.documentElement.setAttribute("data-pwned","1")''>'
  WHERE sql_id = 502;
UPDATE frames SET function = '<img src=x onerror=document.documentElement.setAttribute("data-pwned","1")>'
  WHERE function = 'main';
UPDATE frames SET file = '"><script>document.documentElement.setAttribute("data-pwned","1")</script>'
  WHERE function = 'search_titles';
UPDATE errors SET message = '</pre><script>document.documentElement.setAttribute("data-pwned","1")</script>';
UPDATE processes SET exe = '/bin/<svg onload=document.documentElement.setAttribute("data-pwned","1")>' WHERE pid = 100;
