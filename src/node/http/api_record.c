/*
 * api_record.c - the contract test's record of API replies (see api_record.h). Test-only in
 * purpose: nothing happens unless COHORT_API_RECORD is set.
 */
#include "node/http/api_record.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

int cohort_api_record_open(void)
{
    const char *file = getenv("COHORT_API_RECORD");
    if (!file || !*file)
        return -1;
    int fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        cohort_log_node(COHORT_LOG_WARN,
                        "api: cannot open COHORT_API_RECORD file '%s': replies are not "
                        "recorded",
                        file);
    return fd;
}

void cohort_api_record(int fd, const cohort_api_request_t *request, const cohort_api_reply_t *reply)
{
    if (fd < 0)
        return;
    bson_t line = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&line, "method", request->method);
    BSON_APPEND_UTF8(&line, "path", request->path ? request->path : "");
    if (request->query)
        BSON_APPEND_UTF8(&line, "query", request->query);
    BSON_APPEND_INT32(&line, "status", reply->status);
    if (reply->raw)
        BSON_APPEND_UTF8(&line, "content_type", reply->content_type);
    else
        BSON_APPEND_DOCUMENT(&line, "body", &reply->body);
    size_t len = 0;
    char *text = bson_as_relaxed_extended_json(&line, &len);
    bson_destroy(&line);
    if (!text)
        return;
    char *with_end = bson_malloc(len + 1);
    memcpy(with_end, text, len);
    with_end[len] = '\n';
    if (write(fd, with_end, len + 1) != (ssize_t)(len + 1))
        cohort_log_node(COHORT_LOG_WARN, "api: cannot write to the COHORT_API_RECORD file");
    bson_free(with_end);
    bson_free(text);
}
