#!/bin/sh
# The process protocol by hand, in plain POSIX shell with no helper and no jq: one confirm.
# askgate writes JSON lines to stdin and reads JSON lines from stdout.

read -r start                      # {"type":"start","run":"…","input":"…",…}

echo '{"type":"confirm","prompt":"Restart the web server?","default":false}'
read -r outcome                    # {"type":"outcome","step":0,"status":…}

case "$outcome" in
  *'"status":"pending"'*)
    exit 0 ;;                      # asked for the first time: the answer re-runs this script
  *'"status":"answered"'*'"value":true'* | *'"value":true'*'"status":"answered"'*)
    echo '{"type":"done","reply":"Restarted the web server."}' ;;
  *'"status":"declined"'*)
    echo '{"type":"done","reply":"Declined; nothing restarted."}' ;;
  *)
    echo '{"type":"done","reply":"Not restarted."}' ;;
esac
