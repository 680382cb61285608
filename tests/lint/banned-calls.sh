#!/bin/sh
# Fails when daemon or module code calls something that blocks the event
# loop: synchronous name resolution (numeric-only conversions excepted),
# sleeping, spawning shells. A line may
# opt out with a comment "lint: allow-blocking (why)" when the call provably
# runs off the loop or before it starts.
set -u
root=${1:-${PRISMLB_SOURCE_ROOT:-.}}
pattern='\<(getaddrinfo|gethostbyname|gethostbyname2|gethostbyaddr|getnameinfo|sleep|usleep|nanosleep|system|popen|curl_easy_perform|evdns_base_resolve_blocking)[[:space:]]*\('
hits=$(cd "$root" && grep -rnE "$pattern" core modules --include='*.c' --include='*.h' 2>/dev/null \
  | grep -v 'lint: allow-blocking' | grep -vE 'NI_NUMERICHOST|AI_NUMERICHOST' \
  | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(\*|/\*|//)')
if [ -n "$hits" ]; then
  echo "blocking calls on the event loop:"
  echo "$hits"
  exit 1
fi
echo "no blocking calls in core/ and modules/"
