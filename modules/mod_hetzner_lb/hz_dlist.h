/*
 * hz_dlist.h: the intrusive doubly linked list mod_hetzner_lb keeps its
 * calls (hz_api.c) and ready queue items (hz_queue.c) on: a head and a tail
 * pointer, and in each element a prev and a next member, named by the
 * caller. The list never owns its elements.
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

/* Take element it (on the list) off it. */
#define HZ_DLIST_UNLINK(head, tail, it, prev, next)                                                \
    do {                                                                                           \
        if ((it)->prev)                                                                            \
            (it)->prev->next = (it)->next;                                                         \
        else                                                                                       \
            (head) = (it)->next;                                                                   \
        if ((it)->next)                                                                            \
            (it)->next->prev = (it)->prev;                                                         \
        else                                                                                       \
            (tail) = (it)->prev;                                                                   \
        (it)->prev = (it)->next = NULL;                                                            \
    } while (0)

#endif
