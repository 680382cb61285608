/*
 * hz_dlist.h: the intrusive doubly linked lists of mod_hetzner_lb: its
 * calls (hz_api.c) and ready queue items (hz_queue.c) on lists with a head
 * and a tail pointer, its Service states (hz_state.c) and Kubernetes
 * writes (hz_kube.c) on lists with a head only, newest first. Each element
 * has a prev and a next member, named by the caller. A list never owns its
 * elements.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_DLIST_H
#define PRISMLB_MOD_HETZNER_LB_HZ_DLIST_H

/* Put element it (not on the list) after tail. */
#define HZ_DLIST_APPEND(head, tail, it, prev, next)                                                \
    do {                                                                                           \
        (it)->next = NULL;                                                                         \
        (it)->prev = (tail);                                                                       \
        if (tail)                                                                                  \
            (tail)->next = (it);                                                                   \
        else                                                                                       \
            (head) = (it);                                                                         \
        (tail) = (it);                                                                             \
    } while (0)

/* Put element it (not on the list) in front of head, on a list with a
 * head only. */
#define HZ_DLIST_PUSH(head, it, prev, next)                                                        \
    do {                                                                                           \
        (it)->prev = NULL;                                                                         \
        (it)->next = (head);                                                                       \
        if (head)                                                                                  \
            (head)->prev = (it);                                                                   \
        (head) = (it);                                                                             \
    } while (0)

/* Take element it (on the list) off a list with a head only. */
#define HZ_DLIST_REMOVE(head, it, prev, next)                                                      \
    do {                                                                                           \
        if ((it)->prev)                                                                            \
            (it)->prev->next = (it)->next;                                                         \
        else                                                                                       \
            (head) = (it)->next;                                                                   \
        if ((it)->next)                                                                            \
            (it)->next->prev = (it)->prev;                                                         \
        (it)->prev = (it)->next = NULL;                                                            \
    } while (0)

/* Take element it (on the list) off it. */
#define HZ_DLIST_UNLINK(head, tail, it, prev, next)                                                \
    do {                                                                                           \
        if (!(it)->next)                                                                           \
            (tail) = (it)->prev;                                                                   \
        HZ_DLIST_REMOVE(head, it, prev, next);                                                     \
    } while (0)

#endif
